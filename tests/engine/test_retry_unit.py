import random
from email.utils import formatdate

from batches.models import BatchItem
from gateway_engine.retry import (
    ErrorType,
    RetryPolicy,
    error_class,
    is_retryable_error,
    parse_reset_duration,
    parse_retry_after,
    rate_limit_wait,
)
from gateway_engine.wire.openai import error_type_for_status


def test_engine_error_types_match_the_model_choices():
    engine = {k: v for k, v in vars(ErrorType).items() if k.isupper()}
    choices = BatchItem._meta.get_field("error_type").choices
    assert choices == [(value, name.replace("_", " ").title()) for name, value in engine.items()]
    # the values and labels the migrations recorded (batches 0004, 0010)
    assert choices == [
        ("client_error", "Client Error"),
        ("rate_limited", "Rate Limited"),
        ("server_error", "Server Error"),
        ("timeout", "Timeout"),
        ("connection_error", "Connection Error"),
        ("quota_impossible", "Quota Impossible"),
        ("no_provider", "No Provider"),
        ("invalid_response", "Invalid Response"),
        ("gateway_error", "Gateway Error"),
        ("cancelled", "Cancelled"),
        ("expired", "Expired"),
        ("budget_exceeded", "Budget Exceeded"),
        ("overloaded", "Overloaded"),
        ("provider_quota_exhausted", "Provider Quota Exhausted"),
    ]


def test_retryable_table():
    # statuses through the wire format's classification, then the retry rule
    for status in (400, 401, 403, 404, 409, 422):
        assert not is_retryable_error(error_type_for_status(status))
    for status in (429, 500, 502, 503, 504):
        assert is_retryable_error(error_type_for_status(status))
    assert is_retryable_error(ErrorType.TIMEOUT)
    assert is_retryable_error(ErrorType.CONNECTION_ERROR)
    assert error_class(ErrorType.RATE_LIMITED, 429) == "429"
    assert error_class(ErrorType.SERVER_ERROR, 503) == "5xx"
    assert error_class(ErrorType.CLIENT_ERROR, 404) == "4xx"
    assert error_class(ErrorType.TIMEOUT, None) == "timeout"


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    now = 1_800_000_000.0
    assert parse_retry_after(formatdate(now + 7, usegmt=True), now=now) == 7.0
    assert parse_retry_after(formatdate(now - 7, usegmt=True), now=now) == 0.0
    assert parse_reset_duration("6m0s") == 360.0
    assert parse_reset_duration("250ms") == 0.25
    assert parse_reset_duration("1m2.5s") == 62.5
    assert parse_reset_duration("1h") is None  # beyond the 600 s ceiling: malformed, ignored
    assert parse_reset_duration("bogus") is None
    assert rate_limit_wait({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "3s"}) == 3.0
    assert rate_limit_wait({"retry-after": "4", "x-ratelimit-reset-tokens": "30s"}) == 4.0


def test_full_jitter_backoff_grows_and_is_capped():
    policy = RetryPolicy(base_seconds=0.5, cap_seconds=30.0)
    rng = random.Random(7)
    means = []
    for n in range(8):
        samples = [policy.backoff(n, rng) for _ in range(2000)]
        assert all(0.0 <= s <= min(30.0, 0.5 * 2**n) for s in samples)
        assert max(samples) > 0.8 * min(30.0, 0.5 * 2**n)  # jitter spans the whole range
        means.append(sum(samples) / len(samples))
    assert all(later > earlier for earlier, later in zip(means[:6], means[1:7], strict=True))
    assert abs(means[7] - 15.0) < 1.5  # capped at 30 s: mean of uniform(0, 30)

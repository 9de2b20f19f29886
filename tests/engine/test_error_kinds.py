"""The one table of how each error type is shown (gateway_engine.error_kinds): every ErrorType has a
complete row, and the code is the error type's own name on every surface but for the differences the
table names (docs/contract.md §4, §6; OpenAI's Batch API's batch_expired / batch_cancelled)."""

from __future__ import annotations

from gateway_engine.error_kinds import ERROR_KINDS, QUEUE_TIMEOUT, error_kind
from gateway_engine.retry import ErrorType

ERROR_TYPES = sorted(v for k, v in vars(ErrorType).items() if k.isupper())
OPENAI_TYPES = {"invalid_request_error", "rate_limit_error", "insufficient_quota", "server_error"}
# the only rows whose code is not the error type's name on a surface
NAMED_DIFFERENCES = {
    ErrorType.EXPIRED: (QUEUE_TIMEOUT, "batch_expired"),
    ErrorType.CANCELLED: ("cancelled", "batch_cancelled"),
}


def test_every_error_type_has_a_complete_row():
    missing = [name for name in ERROR_TYPES if name not in ERROR_KINDS]
    assert missing == []
    for name in ERROR_TYPES:
        row = ERROR_KINDS[name]
        assert row.name == name
        assert 400 <= row.status < 600, name
        assert row.openai_type in OPENAI_TYPES, name
        assert row.code and row.line_code, name  # an error type reaches both surfaces
        assert (row.code, row.line_code) == NAMED_DIFFERENCES.get(name, (name, name)), name


def test_rows_beyond_the_error_types_are_interactive_refusals():
    for name, row in ERROR_KINDS.items():
        if name not in ERROR_TYPES:
            assert row.line_code is None and row.code == name and 400 <= row.status < 600


def test_an_unknown_name_is_a_gateway_error():
    assert error_kind("no_such_type") is error_kind("") is ERROR_KINDS[ErrorType.GATEWAY_ERROR]


def test_provider_answers_are_the_http_error_types():
    answers = {name for name, row in ERROR_KINDS.items() if row.provider_answer}
    assert answers == {
        ErrorType.CLIENT_ERROR,
        ErrorType.RATE_LIMITED,
        ErrorType.SERVER_ERROR,
        ErrorType.OVERLOADED,
        ErrorType.PROVIDER_QUOTA_EXHAUSTED,
    }


def test_the_engine_reads_retries_and_breaker_failures_from_the_same_rows():
    """Retryable and breaker-failure were two side tables (retry.py, recording.py); now two columns."""
    from gateway_engine import error_kinds, recording, retry
    from gateway_engine.error_types import ErrorType as E

    assert retry.RETRYABLE_ERROR_TYPES is error_kinds.RETRYABLE
    assert recording.BREAKER_FAILURES is error_kinds.BREAKER_FAILURES
    transient = {E.SERVER_ERROR, E.TIMEOUT, E.CONNECTION_ERROR, E.INVALID_RESPONSE, E.OVERLOADED}
    assert error_kinds.RETRYABLE == transient | {E.RATE_LIMITED}
    assert set(error_kinds.BREAKER_FAILURES) == transient  # a 429 and a 4xx are not health signals
    assert not any(
        retry.is_retryable_error(t) for t in (E.CLIENT_ERROR, E.PROVIDER_QUOTA_EXHAUSTED, E.EXPIRED)
    )

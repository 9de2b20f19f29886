"""Kind openai: a 429 ``insufficient_quota`` is billing (provider_quota_exhausted, billing pause, not
retried), any other 429 stays rate_limited; cached prompt tokens are read."""

from __future__ import annotations

import pytest

from gateway_engine.outcomes import from_answer
from gateway_engine.retry import ErrorType
from gateway_engine.wire.openai import OpenAIWire

from .helpers import config, encoded, fixture

WIRE = OpenAIWire()
F = fixture("openai_errors")


@pytest.mark.parametrize("case", ["insufficient_quota_429", "insufficient_quota_type_only_429"])
def test_insufficient_quota_is_billing_with_a_pause(case):
    verdict = WIRE.classify_error(F[case]["status"], F[case]["body"])
    assert verdict.error_type == ErrorType.PROVIDER_QUOTA_EXHAUSTED and not verdict.retryable
    assert verdict.pause.reason == "billing" and verdict.pause.until_epoch is None
    assert verdict.message.startswith("You exceeded your current quota")


def test_a_rate_limit_429_and_insufficient_quota_on_another_status_are_not_billing():
    assert WIRE.classify_error(429, F["rate_limit_429"]["body"]).error_type == ErrorType.RATE_LIMITED
    assert WIRE.classify_error(400, F["insufficient_quota_429"]["body"]).error_type == ErrorType.CLIENT_ERROR
    assert WIRE.classify_error(429, None).pause is None


def test_check_params_stays_empty_and_reserved_params_unchanged():
    assert WIRE.check_params(config("openai"), {"anything": 1, "temperature": 9}) == []
    assert WIRE.reserved_params == frozenset({"model", "messages", "stream"})


def test_cached_prompt_tokens_are_read():
    usage = WIRE.usage(
        {
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "total_tokens": 105,
                "prompt_tokens_details": {"cached_tokens": 64},
            }
        }
    )
    assert usage == {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105, "cached_tokens": 64}
    assert "cached_tokens" not in WIRE.usage(
        {"usage": {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}}}
    )


def test_outcome_of_insufficient_quota_carries_the_pause():
    outcome = from_answer(WIRE, 429, 1, encoded(F["insufficient_quota_429"]["body"]), {"retry-after": "1"})
    assert outcome.error_type == ErrorType.PROVIDER_QUOTA_EXHAUSTED and outcome.pause.reason == "billing"

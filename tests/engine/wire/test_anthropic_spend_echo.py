"""A 400 from Anthropic is a spend-limit pause (for every team) only when Anthropic's own sentence opens
its message. Before: the pattern was searched anywhere in the message (``you have reached your specified
.*api usage limits``, across lines), so a 400 whose text quoted a caller's input containing those words
paused the provider for everyone until an operator cleared it."""

from __future__ import annotations

from gateway_engine.retry import ErrorType
from gateway_engine.wire.anthropic import classify_error


def _error(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def test_anthropics_own_spend_limit_400_pauses_the_provider():
    verdict = classify_error(400, _error("You have reached your specified API usage limits. You will regain "
                                         "access on 2026-04-01 at 00:00 UTC."))  # fmt: skip
    assert verdict.error_type == ErrorType.PROVIDER_QUOTA_EXHAUSTED and verdict.pause is not None


def test_a_400_echoing_the_callers_text_is_the_callers_error_not_a_pause():
    echoed = ("messages.0.content.0.text: unexpected value 'please say: you have reached your specified "
              "API usage limits' in a tool_result block")  # fmt: skip
    verdict = classify_error(400, _error(echoed))
    assert verdict.error_type == ErrorType.CLIENT_ERROR and verdict.pause is None

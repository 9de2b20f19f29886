"""What a failed batch-API call or an errored line means, by the project's one rule: the provider kind's
error verdict (gateway_engine.wire ``classify_error``: 429 rate_limited, 5xx server_error, Anthropic 529
overloaded, billing → provider_quota_exhausted, other 4xx client_error) and gateway_engine.retry's
retryable set (rate_limited, server_error, timeout, connection_error, invalid_response, overloaded)."""

from __future__ import annotations

import json
from typing import Any

from ..answers import AnswerRejected, parse_answer, without_secret
from ..http_batch import RawAnswer
from ..kinds import batch_protocol
from ..retry import DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS, is_retryable_error, rate_limit_wait
from ..wire import ErrorVerdict, for_kind
from ..wire.anthropic_stream import ERROR_STATUS
from .types import BatchApiError, LineResult

# Anthropic's error types -> the status the Messages API answers them with: the wire module's one table
ANTHROPIC_ERROR_STATUS = ERROR_STATUS


def parsed(answer: RawAnswer) -> Any:
    """The answer's JSON (cleaned, gateway_engine.answers), None when it is not JSON."""
    try:
        return parse_answer(answer.body)
    except AnswerRejected:
        return None


def call_error(kind: str, answer: RawAnswer, what: str, secret: str = "") -> BatchApiError:
    """The BatchApiError of a call that did not succeed (``what``: the call, e.g. "create batch");
    ``secret``, the key the call carried, is taken out of the answer before it is read."""
    if answer.error_type is not None:
        return BatchApiError(
            f"{what}: {answer.message}",
            status=answer.status or None,
            retryable=is_retryable_error(answer.error_type),
            error_type=answer.error_type,
        )
    wire = for_kind(kind)
    body = parsed(RawAnswer(answer.status, without_secret(answer.body, secret), answer.headers))
    verdict = wire.classify_error(answer.status, body)
    wait = rate_limit_wait(
        wire.rate_limit_headers(answer.headers, body), ceiling=DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS
    )
    return BatchApiError(
        f"{what}: HTTP {answer.status}: {verdict.message}",
        status=answer.status,
        retryable=verdict.retryable,
        retry_after=wait,
        error_type=verdict.error_type,
    )


def invalid_answer(what: str, problem: str, status: int | None = None) -> BatchApiError:
    """A 2xx the client cannot read (not JSON, a field missing): invalid_response, retryable."""
    return BatchApiError(f"{what}: {problem}", status=status, retryable=True, error_type="invalid_response")


def line_verdict(kind: str, result: LineResult, secret: str = "") -> ErrorVerdict | None:
    """What an ``errored`` line means (its type, retryable or not, the team's message); None for any
    other outcome (succeeded; canceled and expired lines are the caller's decision). ``secret``: the
    provider's key, taken out of the line's error before it is read."""
    if result.outcome != "errored":
        return None
    status = result.status_code if result.status_code is not None else 500
    error = result.error or {}
    if secret:
        error = json.loads(without_secret(json.dumps(error).encode(), secret))
    body = {"type": "error", "error": error} if batch_protocol(kind) == "anthropic" else {"error": error}
    return for_kind(kind).classify_error(status, body)

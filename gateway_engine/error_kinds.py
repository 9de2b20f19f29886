"""The ONE table of what each error type means (docs/contract.md §4 and §6): for the engine, whether it
is retried (``retryable``, read by retry.is_retryable_error) and whether it counts against the
provider's breaker (``breaker_failure``, read by recording.py); for every surface, how it is shown.
The names themselves are gateway_engine/error_types.py.

A row per error type (``retry.ErrorType``, the RESULT's ``error.type``): the interactive lane's HTTP
status, OpenAI error ``type`` and ``code`` (``interactive.errors``), and the code of a ``/v1`` batch
error line (``openai_api.conversion``). The code is the error type's own name on both surfaces; the
only differences are named in the row: an item that ran out of time is the contract's
``gateway_queue_timeout`` on the interactive lane and OpenAI's ``batch_expired`` on a ``/v1`` line, a
cancelled one OpenAI's ``batch_cancelled``.

Rows that are not an error type are the interactive lane's own refusals (``lines`` False: never in a
``/v1`` batch file); a new refusal is one more row here, and ``interactive.errors.refusal(name,
message)`` answers it. tests/engine/test_error_kinds.py checks every ErrorType has a complete row.
"""

from __future__ import annotations

from dataclasses import dataclass

from .error_types import ErrorType


@dataclass(frozen=True)
class ErrorKind:
    """How one error type (or interactive refusal) is answered.

    ``status``, ``openai_type``, ``code``: the interactive lane's answer (HTTP status and OpenAI's
    ``{"error": {"type", "code"}}``). ``line_code``: the ``error.code`` of a ``/v1`` batch error line
    (None: the row is an interactive refusal, never in a batch file). ``provider_answer``: the error is
    a provider's HTTP answer, so a ``/v1`` line keeps it as ``response`` with the provider's status
    (OpenAI's Batch API does the same) when that status is known. ``retry_after``: the interactive
    answer carries ``Retry-After``; ``no_retry``: it carries ``x-should-retry: false`` (the SDKs do not
    retry). ``param``: the request field the error is about."""

    name: str
    status: int
    openai_type: str
    code: str
    line_code: str | None
    provider_answer: bool = False
    retry_after: bool = False
    no_retry: bool = False
    param: str | None = None
    # the engine's side: the attempt is tried again (retry.is_retryable_error); it counts against the
    # provider's breaker (recording.py; 4xx, the item's own fault, and 429s are not health signals)
    retryable: bool = False
    breaker_failure: bool = False


# interactive refusals that are not an item's error type
QUEUE_TIMEOUT = "gateway_queue_timeout"  # docs/contract.md §6: the wait for quota passed the limit
TEAM_WAITING_LIMIT = "team_waiting_limit"  # the team has Team.max_waiting_calls calls waiting already

_SERVER = "server_error"
_INVALID = "invalid_request_error"
_RATE = "rate_limit_error"

ERROR_KINDS: dict[str, ErrorKind] = {
    row.name: row
    for row in (
        ErrorKind(
            ErrorType.CLIENT_ERROR, 400, _INVALID, "client_error", "client_error", provider_answer=True
        ),
        ErrorKind(
            ErrorType.RATE_LIMITED,
            429,
            _RATE,
            "rate_limited",
            "rate_limited",
            provider_answer=True,
            retry_after=True,
            retryable=True,
        ),  # fmt: skip
        ErrorKind(
            ErrorType.SERVER_ERROR,
            502,
            _SERVER,
            "server_error",
            "server_error",
            provider_answer=True,
            retryable=True,
            breaker_failure=True,
        ),  # fmt: skip
        ErrorKind(
            ErrorType.OVERLOADED,
            503,
            _SERVER,
            "overloaded",
            "overloaded",
            provider_answer=True,
            retry_after=True,
            retryable=True,
            breaker_failure=True,  # load across all customers: the breaker moves items to the next provider
        ),  # fmt: skip
        ErrorKind(
            ErrorType.PROVIDER_QUOTA_EXHAUSTED,
            503,
            _SERVER,
            "provider_quota_exhausted",
            "provider_quota_exhausted",
            provider_answer=True,
            retry_after=True,
        ),  # fmt: skip
        ErrorKind(
            ErrorType.TIMEOUT, 504, _SERVER, "timeout", "timeout", retryable=True, breaker_failure=True
        ),
        ErrorKind(
            ErrorType.CONNECTION_ERROR,
            502,
            _SERVER,
            "connection_error",
            "connection_error",
            retryable=True,
            breaker_failure=True,
        ),
        ErrorKind(
            ErrorType.INVALID_RESPONSE,
            502,
            _SERVER,
            "invalid_response",
            "invalid_response",
            retryable=True,
            breaker_failure=True,
        ),
        ErrorKind(ErrorType.NO_PROVIDER, 503, _SERVER, "no_provider", "no_provider", retry_after=True),
        ErrorKind(
            ErrorType.QUOTA_IMPOSSIBLE,
            400,
            _INVALID,
            "quota_impossible",
            "quota_impossible",
            param="max_tokens",
        ),  # fmt: skip
        ErrorKind(
            ErrorType.BUDGET_EXCEEDED,
            429,
            "insufficient_quota",
            "budget_exceeded",
            "budget_exceeded",
            no_retry=True,
        ),  # fmt: skip
        ErrorKind(ErrorType.GATEWAY_ERROR, 500, _SERVER, "gateway_error", "gateway_error"),
        ErrorKind(ErrorType.CANCELLED, 502, _SERVER, "cancelled", "batch_cancelled"),
        ErrorKind(ErrorType.EXPIRED, 429, _RATE, QUEUE_TIMEOUT, "batch_expired", retry_after=True),
        ErrorKind(QUEUE_TIMEOUT, 429, _RATE, QUEUE_TIMEOUT, None, retry_after=True),
        ErrorKind(TEAM_WAITING_LIMIT, 429, _RATE, TEAM_WAITING_LIMIT, None),  # Team.max_waiting_calls
    )
}


# the engine's two columns as sets (retry.py, recording.py read them)
RETRYABLE: frozenset[str] = frozenset(k for k, row in ERROR_KINDS.items() if row.retryable)
BREAKER_FAILURES: tuple[str, ...] = tuple(k for k, row in ERROR_KINDS.items() if row.breaker_failure)


def error_kind(name: str | None) -> ErrorKind:
    """The row of an error type or refusal; an unknown or empty name is a ``gateway_error``."""
    return ERROR_KINDS.get(name or "", ERROR_KINDS[ErrorType.GATEWAY_ERROR])

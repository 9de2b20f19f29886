"""The interactive lane's answers when a call does not succeed, in OpenAI's error shape
``{"error": {"message", "type", "param", "code"}}`` with the status the openai SDK maps to its usual
classes (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 429 RateLimitError, 5xx
InternalServerError / APIStatusError). The one place a call's failure becomes HTTP; status, type,
code and headers of each error type come from ``gateway_engine.error_kinds`` (docs/interactive.md has
the table)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.http import JsonResponse

from gateway_engine.error_kinds import QUEUE_TIMEOUT, error_kind
from gateway_engine.items import ItemResult
from gateway_engine.retry import ErrorType


@dataclass
class CallError(Exception):
    """A call refused or failed: HTTP status, OpenAI error type, message, param, code, extra headers."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


def refusal(name: str, message: str, *, retry_after: float = 1.0, param: str | None = None) -> CallError:
    """The answer of an error type or interactive refusal, as its row of the one table
    (``gateway_engine.error_kinds.ERROR_KINDS``) says: status, OpenAI type, code and headers."""
    kind = error_kind(name)
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if kind.retry_after else {}
    if kind.no_retry:
        headers["x-should-retry"] = "false"
    return CallError(kind.status, message, kind.openai_type, param or kind.param, kind.code, headers)


def stream_error_frame(error_type: str, message: str) -> dict[str, dict[str, str | None]]:
    """The last event of a stream that failed after its 200: ``{"error": {"message", "type", "code"}}``
    with the type and code the same error type gets as a plain answer (its row of the one table)."""
    kind = error_kind(error_type)
    return {"error": {"message": message, "type": kind.openai_type, "code": kind.code}}


def queue_timeout(max_wait: float, retry_after: float, last_error: str = "") -> CallError:
    """The wait for quota would exceed the caller's limit: the gateway's own 429, never a provider's."""
    message = f"no quota for this call within the {max_wait:g} s it may wait (X-Gateway-Max-Wait / "
    message += "GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS); retry later"
    if last_error:
        message += f" (last attempt: {last_error})"
    return refusal(QUEUE_TIMEOUT, message, retry_after=retry_after)


def call_failure(result: ItemResult, *, max_wait: float, retry_after: float) -> CallError:
    """The HTTP answer of a call that ended without an answer (``result``: the engine's final result)."""
    kind, message = result.error_type, result.error_message or "the call failed"
    if result.status == "expired" or kind == ErrorType.EXPIRED:
        return queue_timeout(
            max_wait, retry_after, "" if not result.attempts else message.split("; last error: ")[-1]
        )
    return refusal(kind, message, retry_after=retry_after)

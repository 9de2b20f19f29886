"""The interactive lane's answers when a call does not succeed, in OpenAI's error shape
``{"error": {"message", "type", "param", "code"}}`` with the status the openai SDK maps to its usual
classes (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 429 RateLimitError, 5xx
InternalServerError / APIStatusError). The one place a call's failure becomes HTTP (docs/interactive.md
has the table)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.http import JsonResponse

from gateway_engine.items import ItemResult
from gateway_engine.quota.fair_gate import TeamWaitingLimit
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


def queue_timeout(max_wait: float, retry_after: float, last_error: str = "") -> CallError:
    """The wait for quota would exceed the caller's limit: the gateway's own 429, never a provider's."""
    message = f"no quota for this call within the {max_wait:g} s it may wait (X-Gateway-Max-Wait / "
    message += "GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS); retry later"
    if last_error:
        message += f" (last attempt: {last_error})"
    return CallError(429, message, "rate_limit_error", None, "gateway_queue_timeout",
                     {"Retry-After": str(max(1, math.ceil(retry_after)))})  # fmt: skip


# error type of a failed call → (HTTP status, OpenAI type, code); the ones with a special rule are in
# call_failure below
_FAILURES: dict[str, tuple[int, str, str]] = {
    ErrorType.CLIENT_ERROR: (400, "invalid_request_error", "provider_invalid_request"),
    ErrorType.SERVER_ERROR: (502, "server_error", "provider_server_error"),
    ErrorType.INVALID_RESPONSE: (502, "server_error", "provider_invalid_response"),
    ErrorType.CONNECTION_ERROR: (502, "server_error", "provider_connection_error"),
    ErrorType.TIMEOUT: (504, "server_error", "provider_timeout"),
    ErrorType.OVERLOADED: (503, "server_error", "provider_overloaded"),
    ErrorType.PROVIDER_QUOTA_EXHAUSTED: (503, "server_error", "provider_quota_exhausted"),
    ErrorType.NO_PROVIDER: (503, "server_error", "no_provider"),
    ErrorType.GATEWAY_ERROR: (500, "server_error", "gateway_error"),
    TeamWaitingLimit.code: (429, "rate_limit_error", "team_waiting_limit"),  # Team.max_waiting_calls
}


def call_failure(result: ItemResult, *, max_wait: float, retry_after: float) -> CallError:
    """The HTTP answer of a call that ended without an answer (``result``: the engine's final result)."""
    kind, message = result.error_type, result.error_message or "the call failed"
    if result.status == "expired" or kind == ErrorType.EXPIRED:
        return queue_timeout(
            max_wait, retry_after, "" if not result.attempts else message.split("; last error: ")[-1]
        )
    if kind == ErrorType.BUDGET_EXCEEDED:
        return CallError(
            429, message, "insufficient_quota", None, "insufficient_quota", {"x-should-retry": "false"}
        )
    if kind == ErrorType.QUOTA_IMPOSSIBLE:
        return CallError(400, message, "invalid_request_error", "max_tokens", "quota_impossible")
    if kind == ErrorType.RATE_LIMITED:  # the provider kept answering 429 through every retry
        return CallError(429, message, "rate_limit_error", None, "provider_rate_limited",
                         {"Retry-After": str(max(1, math.ceil(retry_after)))})  # fmt: skip
    status, type_, code = _FAILURES.get(kind, (502, "server_error", kind or "gateway_error"))
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if status in (503,) else {}
    return CallError(status, message, type_, None, code, headers)

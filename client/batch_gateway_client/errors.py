"""The client's exceptions. Every one is a ``GatewayError``.

An answer of status 400 or more raises an ``APIStatusError`` subclass chosen by the status, carrying
what the gateway said: ``errors`` (a list of ``FieldError``, one per item and field for a refused
submission, or the one ``param`` of an OpenAI-shaped error under ``/v1/``), ``detail``, ``code``,
``type``, ``retry_after`` (seconds, from ``Retry-After``) and the whole decoded ``body``. The gateway's
error bodies (docs/api.md, docs/interactive.md):

* ``/api/``: ``{"errors": [{"index", "field", "message"}, ...], "error_count": n}`` (400, 409, 411,
  413, 415, a budget 429 with ``budget``) or ``{"detail": "..."}`` (401, 404, a throttled 429, a 503
  with ``dependency``);
* ``/v1/``: ``{"error": {"message", "type", "param", "code"}}``.

A request that got no answer raises ``APIConnectionError`` (``APITimeoutError`` for a timeout).
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class FieldError:
    """One refused field: ``index`` is the item's 0-based position in the submission (``None`` for
    the body, an option or a header), ``field`` names it (``provider``, ``params.max_tokens``,
    ``messages[0].role``, ``Idempotency-Key`` ...), ``message`` says why."""

    index: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"item {self.index}: " if self.index is not None else ""
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"


class GatewayError(Exception):
    """Base class of every error the client raises."""


class APIConnectionError(GatewayError):
    """No answer: the gateway could not be reached, or the connection broke (after the retries the
    request was allowed). ``__cause__`` is the httpx error."""


class APITimeoutError(APIConnectionError):
    """The request timed out (the client's ``timeout``)."""


class APIStatusError(GatewayError):
    """The gateway answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: Any = None,
        errors: list[FieldError] | None = None,
        error_count: int | None = None,
        detail: str | None = None,
        code: str | None = None,
        type: str | None = None,
        retry_after: float | None = None,
        headers: httpx.Headers | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body
        self.errors = errors or []
        self.error_count = error_count if error_count is not None else len(self.errors)
        self.detail = detail
        self.code = code
        self.type = type
        self.retry_after = retry_after
        self.headers = headers if headers is not None else httpx.Headers()

    @property
    def fields(self) -> list[str]:
        """The names of the refused fields, in the order the gateway listed them."""
        return [e.field for e in self.errors if e.field]


class BadRequestError(APIStatusError):
    """400 (and 411, 413, 415): the request or an item was refused; nothing was stored."""


class AuthenticationError(APIStatusError):
    """401: no, unknown or revoked API key."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404: no such batch for the key's team (or no such route or provider, under /v1)."""


class ConflictError(APIStatusError):
    """409: e.g. an Idempotency-Key used before with another request."""


class RateLimitError(APIStatusError):
    """429: the key's throttle, the team's queue limits (``retry_after`` set) or its token budget
    (``budget`` set, no ``retry_after``); under /v1 the interactive lane's queue timeout or quota."""

    @property
    def budget(self) -> dict | None:
        return self.body.get("budget") if isinstance(self.body, dict) else None


class InternalServerError(APIStatusError):
    """5xx other than 503."""


class ServiceUnavailableError(InternalServerError):
    """503: a dependency of the gateway (Redis, the database) is down (``dependency``), or the
    interactive lane's quota store; ``retry_after`` is set."""

    @property
    def dependency(self) -> str | None:
        return self.body.get("dependency") if isinstance(self.body, dict) else None


class BatchWaitTimeout(GatewayError):
    """``wait_timeout`` passed before the batch finished. The batch goes on running at the gateway;
    ``batch`` is its last object (``batch["id"]`` to cancel or read it later)."""

    def __init__(self, message: str, batch: dict):
        super().__init__(message)
        self.batch = batch


class ItemFailedError(GatewayError):
    """An item of a batch did not succeed (the LangChain Runnable's ``batch`` raises it, or returns it
    in the item's place with ``return_exceptions=True``). ``result`` is its RESULT; ``type`` its
    ``error.type`` (``client_error``, ``rate_limited``, ``cancelled`` ...)."""

    def __init__(self, result: dict):
        error = result.get("error") or {}
        self.result = result
        self.custom_id = result.get("custom_id")
        self.type = error.get("type")
        self.status_code = error.get("status_code")
        super().__init__(f"item {self.custom_id!r} failed: {self.type}: {error.get('message', '')}")


class StreamError(GatewayError):
    """A streamed chat call ended with an error event after its first chunk (the gateway sends
    ``data: {"error": {...}}`` and no ``[DONE]``)."""

    def __init__(self, error: dict):
        self.error = error
        self.type = error.get("type")
        self.code = error.get("code")
        super().__init__(f"{self.code or self.type}: {error.get('message', '')}")


_STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    411: BadRequestError,
    413: BadRequestError,
    415: BadRequestError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds or an HTTP date; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The exception for an error answer (its body must have been read)."""
    status = response.status_code
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:2000]
    errors: list[FieldError] = []
    detail = code = type_ = None
    error_count = None
    if isinstance(body, dict):
        if isinstance(body.get("errors"), list):
            for e in body["errors"]:
                if isinstance(e, dict):
                    errors.append(FieldError(e.get("index"), e.get("field"), str(e.get("message", ""))))
            if isinstance(body.get("error_count"), int):
                error_count = body["error_count"]
        if isinstance(body.get("error"), dict):  # OpenAI's shape (/v1/)
            err = body["error"]
            detail = str(err.get("message", ""))
            code, type_ = err.get("code"), err.get("type")
            if err.get("param"):
                errors.append(FieldError(None, str(err["param"]), detail))
        if isinstance(body.get("detail"), str):
            detail = body["detail"]
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    if retry_after is None and isinstance(body, dict) and isinstance(body.get("retry_after"), (int, float)):
        retry_after = float(body["retry_after"])
    if errors:
        shown = "; ".join(str(e) for e in errors[:5])
        more = (error_count or len(errors)) - min(len(errors), 5)
        summary = shown + (f"; and {more} more" if more > 0 else "")
    else:
        summary = detail or (body if isinstance(body, str) and body else response.reason_phrase)
    cls = _STATUS_CLASSES.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    method, url = response.request.method, response.request.url
    return cls(
        f"{status} from {method} {url.path}: {summary}",
        status_code=status,
        body=body,
        errors=errors,
        error_count=error_count,
        detail=detail,
        code=code,
        type=type_,
        retry_after=retry_after,
        headers=response.headers,
    )

"""The gate every HTTP request passes in the ASGI application (gateway_site.asgi), before its body is read.

Authentication before the body: on ``/api/`` and ``/v1/`` a request that carries an ``Authorization``
header has it checked against the key store first (the interactive lane's cached check,
interactive.auth: the REST API's digest lookup and the failed-key throttle per client address); a refused
key is answered here, in the surface's error shape, before one body byte is read — ``401``, ``429`` past
the failed-key limit, ``503`` when Redis cannot count failures. The interactive paths need a key
(``key_required``): without one they answer ``401`` here too. Every other path (the admin login, the
dashboard's forms, the API's public schema) reaches its view unauthenticated, and the views of the API
check the key before they read (DRF authenticates first).

Body caps: a request without a valid key may send at most ``GATEWAY_PREAUTH_MAX_BODY_BYTES`` (64 KiB);
one with a valid key up to its surface's own cap plus the envelope (``GATEWAY_MAX_BODY_BYTES``, on
``/v1/files`` ``GATEWAY_OPENAI_MAX_FILE_BYTES``) — past it ``413``. A declared ``Content-Length`` above the
cap is answered before reading; a chunked body is cut when it passes it.

Timeouts: while the body arrives no gap may exceed ``GATEWAY_BODY_IDLE_TIMEOUT_SECONDS`` and the whole body
must be in within ``GATEWAY_BODY_READ_TIMEOUT_SECONDS`` of the first read, else ``408``. Whenever the
gate answers, or the view answers before the whole body arrived (a ``401`` right after the headers), the
answer carries ``Connection: close``: the server closes the connection instead of reading the rest of a
body nobody wants. Streams: ``stream_send`` bounds how long one chunk may wait for a slow reader.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest

from interactive.auth import authenticate
from interactive.errors import CallError
from interactive.surfaces import messages as anthropic_messages
from observability.logs import clean_request_id

BODY_SLACK = 64 * 1024  # the JSON envelope around the largest body a surface allows
MULTIPART_SLACK = 1024 * 1024  # the multipart envelope around the largest /v1/files upload
FILES_PATH = "/v1/files"
MESSAGES_PATH = "/v1/messages"  # Anthropic's Messages API: its error shape (interactive/surfaces/)
DISCONNECT = {"type": "http.disconnect"}


class StreamCut(OSError):
    """A streamed answer stopped by the gateway (a reader too slow for GATEWAY_STREAM_SEND_TIMEOUT_SECONDS):
    an OSError, so the stream ends as if the client had gone."""


def surface(path: str) -> str | None:
    """``api`` or ``v1`` for the two API surfaces (their error shapes differ), None for any other path."""
    if path.startswith("/v1/"):
        return "v1"
    if path.startswith("/api/"):
        return "api"
    return None


def header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def guarded(app, scope, receive, send, *, key_required: bool = False) -> None:
    """Run ``app`` for this request behind the gate (the module docstring)."""
    kind = surface(scope.get("path", ""))
    authenticated = False
    if kind is not None and (key_required or header(scope, b"authorization") is not None):
        request = ASGIRequest(scope, io.BytesIO(b""))
        if _host_allowed(request):  # a disallowed Host is the view's 400, unauthenticated
            try:
                await authenticate(request)
            except CallError as error:
                await refuse(send, scope, kind, error)
                return
            authenticated = True
    cap = body_cap(scope.get("path", ""), authenticated)
    declared = _content_length(scope)
    if authenticated and declared is not None and declared > cap:
        await refuse(send, scope, kind, too_large(cap))
        return
    body = GuardedBody(scope, receive, send, cap=cap, kind=kind)
    await app(scope, body.receive, body.send)


def _host_allowed(request: ASGIRequest) -> bool:
    try:
        request.get_host()
    except DisallowedHost:
        return False
    return True


def body_cap(path: str, authenticated: bool) -> int:
    if not authenticated:
        return int(settings.GATEWAY_PREAUTH_MAX_BODY_BYTES)
    if path.rstrip("/") == FILES_PATH:
        return int(settings.GATEWAY_OPENAI_MAX_FILE_BYTES) + MULTIPART_SLACK
    return int(settings.GATEWAY_MAX_BODY_BYTES) + BODY_SLACK


def _content_length(scope) -> int | None:
    value = header(scope, b"content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def too_large(cap: int) -> CallError:
    return CallError(413, f"request body larger than {cap} bytes", "invalid_request_error", None,
                     "request_too_large")  # fmt: skip


class GuardedBody:
    """``receive`` and ``send`` of one request with the body's cap and timeouts; the gate's own answer
    (413, 408) replaces the app's, which is then dropped, and the app sees the client gone."""

    def __init__(self, scope, receive, send, *, cap: int, kind: str | None):
        self.scope, self._receive, self._send = scope, receive, send
        self.cap, self.kind = cap, kind
        self.received = 0
        # no Content-Length and no Transfer-Encoding, or a length of 0: there is no body to wait for
        self.complete = _content_length(scope) in (None, 0) and header(scope, b"transfer-encoding") is None
        self.answered = False  # the gate answered: the app's messages are dropped
        self.started = False
        self.deadline: float | None = None

    async def receive(self) -> dict[str, Any]:
        if self.answered:
            return DISCONNECT
        if self.complete:  # the body is in: waiting for a disconnect (a stream's watcher) has no bound
            return await self._receive()
        loop = asyncio.get_running_loop()
        if self.deadline is None:
            self.deadline = loop.time() + float(settings.GATEWAY_BODY_READ_TIMEOUT_SECONDS)
        wait = min(float(settings.GATEWAY_BODY_IDLE_TIMEOUT_SECONDS), self.deadline - loop.time())
        try:
            message = await asyncio.wait_for(self._receive(), max(wait, 0.0))
        except TimeoutError:
            await self._refuse(timed_out())
            return DISCONNECT
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.cap:
                await self._refuse(too_large(self.cap))
                return DISCONNECT
            self.complete = not message.get("more_body", False)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        if self.answered:
            return
        if message["type"] == "http.response.start":
            self.started = True
            if not self.complete:  # answered before the whole body came: do not read the rest
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
        await self._send(message)

    async def _refuse(self, error: CallError) -> None:
        self.answered = True
        if not self.started:
            await refuse(self._send, self.scope, self.kind, error)


def timed_out() -> CallError:
    message = (f"request body not received in time (no data for {settings.GATEWAY_BODY_IDLE_TIMEOUT_SECONDS:g} s, "
               f"or not complete within {settings.GATEWAY_BODY_READ_TIMEOUT_SECONDS:g} s)")  # fmt: skip
    return CallError(408, message, "invalid_request_error", None, "request_timeout")


async def refuse(send, scope, kind: str | None, error: CallError) -> None:
    """The gate's answer in the surface's shape: OpenAI's error object on ``/v1/`` (Anthropic's on
    ``/v1/messages``), ``{"detail"}`` on ``/api/`` (+ ``dependency`` on a 503, ``WWW-Authenticate:
    Bearer realm="api"`` on a 401), plain ``{"detail"}`` elsewhere; always with ``Connection: close``."""
    headers = dict(error.headers)
    status = error.status
    if kind == "v1" and scope.get("path", "").rstrip("/") == MESSAGES_PATH:  # Anthropic's error shape
        status, body = anthropic_messages.error_body(error)
    elif kind == "v1":
        body: dict[str, Any] = error.body()
    else:
        body = {"detail": error.message}
        if error.status == 503:
            body["dependency"] = "redis" if "redis" in error.message.lower() else "database"
        if error.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="api"'
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"),
           (b"x-request-id", clean_request_id(header(scope, b"x-request-id")).encode()),
           (b"connection", b"close")]  # fmt: skip
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    try:
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})
    except OSError:  # the client is gone already
        pass


def stream_send(send: Callable[[dict], Awaitable[None]]) -> Callable[[dict], Awaitable[None]]:
    """``send`` for a streamed answer: a chunk that a slow reader does not take within
    GATEWAY_STREAM_SEND_TIMEOUT_SECONDS ends the stream (StreamCut)."""
    timeout = float(settings.GATEWAY_STREAM_SEND_TIMEOUT_SECONDS)

    async def bounded(message: dict) -> None:
        try:
            await asyncio.wait_for(send(message), timeout)
        except TimeoutError:
            raise StreamCut(f"the client did not read the stream for {timeout:g} s") from None

    return bounded


def stream_too_long_message() -> str:
    return f"the stream exceeded GATEWAY_STREAM_MAX_SECONDS ({settings.GATEWAY_STREAM_MAX_SECONDS:g} s)"


def stream_too_long_event() -> bytes:
    """The last event of a stream cut at GATEWAY_STREAM_MAX_SECONDS (OpenAI's error object in an SSE event;
    a surface's stream ends with its own: its writer's ``cut``)."""
    error = CallError(504, stream_too_long_message(), "server_error", None, "stream_too_long")
    return b"data: " + json.dumps(error.body()).encode() + b"\n\n"

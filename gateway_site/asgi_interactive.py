"""The interactive paths as a plain ASGI callable (gateway_site.asgi routes ``/v1/chat/completions`` and
``/v1/models`` here): the request read from ``receive``, a Django ``ASGIRequest`` built over it, the async
view called, its answer sent — and nothing else per call.

Why not Django's ``ASGIHandler``: for every request it opens a thread-sensitive context (a new OS thread
for the ``sync_to_async`` calls inside it, joined at the end), sends ``request_started`` /
``request_finished`` through sync receivers (two more hops into that thread), spools the body into a
temporary file and starts a disconnect listener task — measured at about a third of a call's CPU
(docs/benchmarks.md, "Interactive lane"). The interactive views use the ORM only in their own worker
threads (auth, targets, records), which close their connections themselves, so none of that is needed.

What the site's middleware would do for these paths is done here: the request id (``X-Request-ID`` in,
echoed out, on every log line), the Host check (a disallowed Host → 400 in OpenAI's shape), and the
API answer headers. A client that disconnects cancels its call: while the view runs (waiting for
quota, or for a plain call's answer) the view is cancelled (``_unless_gone``: the engine closes the
upstream connection and gives back the lease, the in-flight slot and the reservation); during a
streamed answer the stream is (the view's generator closes the upstream and releases everything).
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse

from gateway_site.ingress import stream_send, stream_too_long_event, stream_too_long_message
from interactive import views
from interactive.errors import CallError
from observability.logs import clean_request_id, request_id_var

log = logging.getLogger("django.request")

VIEWS: dict[str, Callable[[Any], Awaitable[HttpResponseBase]]] = {
    "/v1/chat/completions": views.chat_completions,
    "/v1/models": views.models,
    "/v1/responses": views.responses,
    "/v1/messages": views.messages,
    "/v1/embeddings": views.embeddings,
}
BODY_SLACK = 64 * 1024  # the JSON envelope around the largest item the settings allow


def _error(status: int, message: str, code: str, path: str = "") -> HttpResponse:
    """The path's own error shape (OpenAI's; Anthropic's on /v1/messages: views.error_answer)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return views.error_answer(path, CallError(status, message, kind, None, code))


async def _read_body(receive) -> tuple[bytes | None, bool]:
    """The whole request body (None past the cap) and whether the client is still there."""
    cap = int(settings.GATEWAY_MAX_BODY_BYTES) + BODY_SLACK
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None, False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None, True
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts), True


def _headers(response: HttpResponseBase, request_id: str) -> list[tuple[bytes, bytes]]:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", str(settings.SECURE_REFERRER_POLICY or "same-origin"))
    response.headers.setdefault("Cache-Control", "no-store")
    response["X-Request-ID"] = request_id
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.items()]


async def interactive_app(scope, receive, send) -> None:
    path = scope["path"]
    rid = clean_request_id(_header(scope, b"x-request-id"))
    token = request_id_var.set(rid)
    try:
        body, present = await _read_body(receive)
        if not present:
            return
        if body is None:
            response: HttpResponseBase = _error(413, "request body too large", "request_too_large", path)
        else:
            answered = await _unless_gone(_answer(scope, body, path), receive)
            if answered is None:
                return
            response = answered
        await _send(response, rid, receive, send)
    finally:
        request_id_var.reset(token)


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def _answer(scope, body: bytes, path: str) -> HttpResponseBase:
    request = ASGIRequest({**scope, "path": path}, io.BytesIO(body))
    try:
        request.get_host()
    except DisallowedHost:
        return _error(
            400, "Invalid Host header: this gateway does not serve that host name", "invalid_host", path
        )
    try:
        return await VIEWS[path](request)
    except RequestDataTooBig:
        return _error(413, "request body too large", "request_too_large", path)
    except Exception:  # noqa: BLE001 - a bug answers 500 in the path's shape, and is logged with its traceback
        log.exception("interactive view failed: %s", path)
        return _error(
            500, "internal server error; the request id is in the X-Request-ID header", "server_error", path
        )


async def _unless_gone(view: Awaitable[HttpResponseBase], receive) -> HttpResponseBase | None:
    """The view's answer, or None when the client disconnected first: the view is cancelled then."""
    answer, gone = asyncio.ensure_future(view), asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (answer, gone):
            if not task.done():
                task.cancel()
        await asyncio.gather(answer, gone, return_exceptions=True)
    return None if answer.cancelled() else answer.result()


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send(response: HttpResponseBase, rid: str, receive, send) -> None:
    start = {
        "type": "http.response.start",
        "status": response.status_code,
        "headers": _headers(response, rid),
    }
    try:
        if isinstance(response, StreamingHttpResponse):
            await send(start)
            await _stream(response, receive, send)
        else:
            assert isinstance(response, HttpResponse)
            await send(start)
            await send({"type": "http.response.body", "body": response.content})
    except OSError:  # the client went away while we answered
        pass
    # no response.close(): its request_finished signal is for the ORM connections of the thread that ran
    # the view, and the interactive views use the ORM only in worker threads that close their own


async def _stream(response: StreamingHttpResponse, receive, send) -> None:
    """Send the chunks as they come; a disconnect cancels the iteration (the view's generator then closes
    the upstream call)."""

    send = stream_send(send)  # a reader too slow for GATEWAY_STREAM_SEND_TIMEOUT_SECONDS ends the stream

    async def pump() -> None:
        async for chunk in response:
            await send({"type": "http.response.body", "body": bytes(chunk), "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    sender, watcher = asyncio.ensure_future(pump()), asyncio.ensure_future(_disconnected(receive))
    limit = asyncio.ensure_future(asyncio.sleep(float(settings.GATEWAY_STREAM_MAX_SECONDS)))
    try:
        await asyncio.wait({sender, watcher, limit}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sender, watcher, limit):
            if not task.done():
                task.cancel()
        await asyncio.gather(sender, watcher, limit, return_exceptions=True)
        if limit.done() and not limit.cancelled():
            await _end_too_long(send, response)
        if sender.done() and not sender.cancelled() and sender.exception() is not None:
            exc = sender.exception()
            if not isinstance(exc, OSError):
                raise exc


async def _end_too_long(send, response: StreamingHttpResponse) -> None:
    """A stream past GATEWAY_STREAM_MAX_SECONDS: its generator is closed (the call's lease released); the
    client gets an error event and the stream's end."""
    try:
        cut = getattr(response, "cut_event", None)  # the surface's own last event (interactive.streams)
        event = cut("stream_too_long", stream_too_long_message()) if cut else stream_too_long_event()
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        pass

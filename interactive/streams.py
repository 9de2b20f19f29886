"""``stream: true``: Server-Sent Events in the surface's format (OpenAI's chunks on chat, the Responses
events, Anthropic's Messages events: interactive/surfaces/), written from the engine's chat chunks.

The engine retries and falls back until the first chunk is in (``InteractiveLane.open_stream``); a call
that fails before that is answered like a plain one (an HTTP error in OpenAI's shape). Once the 200 and
its first bytes are out, the call is committed: the chunks are passed on as they come; an upstream
failure after that (an in-stream provider error, a cut connection, an idle timeout) ends the stream
with ``data: {"error": {"message", "type", "code"}}`` (the type and code a plain answer of that error
type has: ``errors.stream_error_frame``) and no ``[DONE]``. The usage chunk is held back
unless the client asked for it (``stream_options.include_usage``); the upstream is always asked for
it, and it settles the buckets and the budget. The provider lease and the in-flight slot are held until
the stream ends; a client that disconnects closes the upstream connection (the provider sees it) and
the grant is settled at its estimate. What the failure frames and the last events are is the surface's
(its ``StreamWriter``); the rest here is the same for all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from django.http import HttpResponse, StreamingHttpResponse

from batches.api.auth import ApiClient
from gateway_engine.attempts import OpenStream
from gateway_engine.interactive import InteractiveLane
from gateway_engine.items import ItemResult, estimate_split
from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_engine.streaming import UpstreamStream, final_outcome

from .calls import Call
from .errors import CallError, call_failure
from .outcome import finish_record, retry_after_for
from .surfaces.base import Answered, StreamWriter

log = logging.getLogger(__name__)


async def open_response(
    lane: InteractiveLane, call: Call, client: ApiClient, on_end: Callable[[], None]
) -> HttpResponse:
    """The streaming answer, or the HTTP error of a call that failed before its first chunk. ``on_end``
    runs once the stream is over (sent to its end, failed, or the client left)."""
    surface = call.surface
    try:
        finished = await lane.open_stream(call.item)
    except QuotaStoreUnavailable as exc:
        return surface.error_response(
            CallError(503, str(exc), "server_error", None, "quota_store_unavailable", {"Retry-After": "5"})
        )
    if finished.stream is None:
        result = finished.result
        retry_after = await retry_after_for(lane, result, call)
        answer = surface.error_response(call_failure(result, max_wait=call.max_wait, retry_after=retry_after))
        finish_record(call, client, result, answer.status_code, None)
        return answer
    opened = finished.stream
    writer = surface.stream_writer(call.call_id, call.model, call.echo)
    response = StreamingHttpResponse(
        _events(lane, call, client, opened, on_end, writer), content_type="text/event-stream"
    )
    response.cut_event = writer.cut  # type: ignore[attr-defined]  # the gateway's own end (asgi_interactive)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not buffer the stream
    response["x-gateway-provider"] = opened.choice.name
    response["x-gateway-attempts"] = str(finished.result.attempts + 1)
    return response


async def _events(
    lane: InteractiveLane,
    call: Call,
    client: ApiClient,
    opened: OpenStream,
    on_end: Callable[[], None],
    writer: StreamWriter,
) -> AsyncIterator[bytes]:
    stream: UpstreamStream = opened.outcome.stream
    client_gone = True
    try:
        async for chunk in stream.chunks():
            if data := writer.chunk(chunk):
                yield data
        client_gone = False
        if stream.error is None:
            yield writer.done(stream.decoder.usage_chunk())
        else:
            yield writer.failed(stream.error.error_type, stream.error.message)
    finally:
        # the client may be gone (this generator is then closed or cancelled): finish in a task of its
        # own, so the lease, the slot and the settle never depend on this one surviving
        on_end()
        done = asyncio.ensure_future(_end(lane, call, client, opened, stream, client_gone))
        try:
            await asyncio.shield(done)
        except (asyncio.CancelledError, GeneratorExit):
            pass


async def _end(
    lane: InteractiveLane,
    call: Call,
    client: ApiClient,
    opened: OpenStream,
    stream: UpstreamStream,
    client_gone: bool,
) -> None:
    try:
        await stream.aclose()
        est_in, est_out = estimate_split(
            call.item.messages, call.item.params, lane.options.default_max_tokens
        )
        estimate = {"prompt_tokens": est_in, "completion_tokens": est_out, "total_tokens": est_in + est_out}
        final = final_outcome(stream, client_gone=client_gone, estimate=estimate)
        result: ItemResult = await lane.end_stream(opened, final)
        status = 200 if result.ok else 499 if client_gone else 200
        finish_record(call, client, result, status, _assembled(call, result))
    except Exception:  # noqa: BLE001 - a failed record must not hide the stream's end
        log.exception("could not end the stream of %s", call.call_id)


def _assembled(call: Call, result: ItemResult) -> dict | None:
    """The streamed answer for the log, as a plain answer of the call's surface (its text, finish
    reason and usage: ``UpstreamStream.assembled``)."""
    if not result.ok or not isinstance(result.response, dict):
        return None
    return call.surface.answer(Answered(call.call_id, call.model, call.echo, result.response))

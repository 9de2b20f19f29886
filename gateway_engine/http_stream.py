"""The streaming half of the one module that owns outbound HTTP (gateway_engine.http): opening a
streaming chat completion and reading it up to its first chunk. Same transport, caps and deadline as
``AiohttpProviderClient.chat``; the request and the events are the wire format's (``StreamingWire``)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import aiohttp

from .answers import AnswerRejected, detail
from .outcomes import HttpOutcome, connection_failed, from_answer, kept_headers, rejected, timed_out
from .retry import ErrorType
from .streaming import UpstreamStream
from .wire.framing import framing_for
from .wire.stream_base import StreamingWire

if TYPE_CHECKING:
    from .http import AiohttpProviderClient

__all__ = ["open_stream"]


def _request(client: AiohttpProviderClient, request_id: str) -> tuple[str, dict[str, str]]:
    """The streaming URL and headers of the client's provider (built once per client; a signed kind
    signs each request on top of them)."""
    if client.stream_endpoint is None:
        from .http import REQUEST_HEADERS

        endpoint = cast(StreamingWire, client.wire).stream_endpoint(client.config)
        accept = framing_for(client.config.kind).content_type
        headers = {**REQUEST_HEADERS, **endpoint.headers, "Accept": accept}
        client.stream_endpoint = (endpoint.url, headers)
    url, headers = client.stream_endpoint
    return url, ({**headers, "X-Request-ID": request_id} if request_id else headers)


async def open_stream(
    client: AiohttpProviderClient,
    session: aiohttp.ClientSession,
    messages: list[Any],
    params: Mapping[str, Any] | None,
    *,
    request_id: str,
    trace: Any,
) -> HttpOutcome:
    """The outcome of everything before the first chunk — an error answer, a timeout (the provider's
    ``timeout_seconds`` to the first chunk), a connection failure, an in-stream error before any chunk,
    a 2xx that is not an event stream — or, ok, with ``outcome.stream`` the open UpstreamStream (idle
    timeout between events: ``timeout_seconds``). The caller reads it to its end or closes it."""
    wire = cast(StreamingWire, client.wire)
    url, headers = _request(client, request_id)
    data = json.dumps(wire.stream_body(client.config, messages, params)).encode()
    headers = client.signed(url, headers, data)
    framing = framing_for(client.config.kind)
    decoder = wire.stream_decoder(
        client.config, completion_id=f"chatcmpl-{uuid.uuid4().hex}", created=int(time.time())
    )
    timeout, started = client.config.timeout_seconds, time.monotonic()
    response: aiohttp.ClientResponse | None = None
    try:
        async with asyncio.timeout(timeout):
            response = await session.post(client.target(url), data=data, headers=headers, allow_redirects=False,
                                          trace_request_ctx=trace)  # fmt: skip
            if not (200 <= response.status < 300) or not response.headers.get("Content-Type", "").startswith(
                framing.content_type
            ):
                return await _not_a_stream(client, response, started)
            stream = UpstreamStream(response, framing.parser(), decoder, pending=[], done=False, idle_timeout=timeout,
                                    started=started, status=response.status,
                                    headers=kept_headers(client.wire, response.headers),
                                    secret=client.config.api_key)  # fmt: skip
            first = await stream.first_step()
    except BaseException as exc:
        if response is not None:
            response.close()
        if isinstance(exc, TimeoutError):
            return timed_out(started, timeout)
        if isinstance(exc, aiohttp.ClientError | OSError):
            return connection_failed(started, exc)
        raise
    if first is None:
        return HttpOutcome(stream.status, int((time.monotonic() - started) * 1000), headers=stream.headers,
                           stream=stream)  # fmt: skip
    response.close()  # an error before any chunk: an ordinary failed attempt (retried as its type says)
    return HttpOutcome(stream.status, int((time.monotonic() - started) * 1000), error_type=first.error_type,
                       message=first.message, headers=stream.headers, usage=decoder.usage,
                       detail=f"in-stream error: {first.code}", pause=first.pause)  # fmt: skip


async def _not_a_stream(
    client: AiohttpProviderClient, response: aiohttp.ClientResponse, started: float
) -> HttpOutcome:
    """An answer that is not an event stream: an error answer (classified as usual), or a 2xx of
    another content type (``invalid_response``)."""
    status, headers = response.status, response.headers
    try:
        raw = await client.read_answer(response)
    except AnswerRejected as exc:
        response.close()
        return rejected(client.wire, status, int((time.monotonic() - started) * 1000), headers, exc)
    response.release()
    latency = int((time.monotonic() - started) * 1000)
    if 200 <= status < 300:
        content_type = headers.get("Content-Type") or "no content type"
        return HttpOutcome(status, latency, error_type=ErrorType.INVALID_RESPONSE,
                           message=f"a streaming request was answered with {content_type}",
                           headers=kept_headers(client.wire, headers), detail=detail(raw))  # fmt: skip
    return from_answer(client.wire, status, latency, raw, headers, client.config.api_key)

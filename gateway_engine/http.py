"""The one module that talks HTTP to providers: transport, size caps, and each answer as an HttpOutcome.

One pooled keep-alive aiohttp client per provider (pool ≥ the provider's max_concurrency), no hidden
retries anywhere (no SDK; aiohttp never re-sends a POST), one hard
per-attempt deadline of the provider's ``timeout_seconds`` covering connect + send + reading the whole
answer. Every call returns an ``HttpOutcome``; nothing here raises for HTTP or network errors, and
nothing here retries.

Everything provider-specific (URL, auth and other headers, the JSON body, ``usage``, the rate-limit
headers kept, what an error answer means) is asked of the provider's wire format (gateway_engine.wire,
``wire_for``). Every answer is read with a size cap and cleaned (gateway_engine.answers) before anyone
stores or counts it: a 2xx that is not a JSON object, too large, not finite or nested too deeply is
``invalid_response``; staff get the capped, cleaned error body in ``HttpOutcome.detail`` (the attempt
log), the team a short sanitised message.

The one provider transport is aiohttp (``AiohttpProviderClient``): against a ~1 ms provider the engine
spent about 11x more CPU per item with httpx (docs/benchmarks.md, "Provider transports"), which was
removed (issue #37). Its tests run against real local servers (tests/local_http.py, the simulator).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import aiohttp
import yarl

from .answers import AnswerRejected, BoundedBody, declared_too_large
from .items import EmbeddingInput
from .kinds import KINDS
from .outcomes import HttpOutcome, connection_failed, from_answer, rejected, timed_out
from .retry import ErrorType
from .routing import ProviderConfig
from .wire import DEFAULT_KIND, WireFormat, for_kind
from .wire.base import AnswerReading, SigningWire
from .wire.embeddings import embeddings_for_kind
from .wire.embeddings_shape import ANSWER_BYTES_PER_INPUT

# the engine's HTTP API (every call returns a gateway_engine.outcomes.HttpOutcome)
__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "AiohttpProviderClient",
    "HttpClients",
    "wire_for",
]

DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024
READ_CHUNK = 64 * 1024


def wire_for(config: ProviderConfig) -> WireFormat:
    """The wire format a provider speaks (its ``kind``, docs/contract.md §3, §5)."""
    return for_kind(config.kind or DEFAULT_KIND)


# ---- clients ---------------------------------------------------------------------------------------------

REQUEST_HEADERS = {
    "Content-Type": "application/json",
    "User-Agent": "batch-gateway/1",
    "Accept-Encoding": "gzip, deflate",  # what BoundedBody can decode
}


class _SentHook:
    """The per-request context of ``_SENT_TRACE``: calls ``on_sent`` once."""

    __slots__ = ("on_sent",)

    def __init__(self, on_sent: Callable[[], None]):
        self.on_sent: Callable[[], None] | None = on_sent

    def fire(self) -> None:
        on_sent, self.on_sent = self.on_sent, None
        if on_sent is not None:
            on_sent()


async def _headers_sent(session: Any, ctx: Any, params: Any) -> None:
    hook = getattr(ctx, "trace_request_ctx", None)
    if isinstance(hook, _SentHook):
        hook.fire()


_SENT_TRACE = aiohttp.TraceConfig()
_SENT_TRACE.on_request_headers_sent.append(_headers_sent)
_SENT_TRACE.freeze()


class AiohttpProviderClient:
    """Pooled keep-alive aiohttp client for one provider: ``chat`` and ``open_stream`` return an
    ``HttpOutcome``, never raise for HTTP or network errors.

    Create it inside the event loop that will use it. aiohttp re-sends nothing: a request on a
    keep-alive connection the server has closed fails as a connection error (retried by the engine
    like any other), only idempotent methods would be retried by aiohttp itself and this is a POST.
    aiohttp's own decompression is off: BoundedBody decompresses with a size cap.
    """

    def __init__(self, config: ProviderConfig, *, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES):
        self.config = config
        self.wire = wire_for(config)
        endpoint = self.wire.endpoint(config)
        self.url = endpoint.url
        self.max_answer_bytes = max_answer_bytes
        pool = max(1, config.max_concurrency)
        self._headers = {**REQUEST_HEADERS, **endpoint.headers}
        self._signed = KINDS[config.kind].signed if config.kind in KINDS else False
        self.stream_endpoint: tuple[str, dict[str, str]] | None = None  # built on the first stream
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool, limit_per_host=0, keepalive_timeout=30.0),
            trace_configs=[_SENT_TRACE],
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),  # the deadline is asyncio.timeout below
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding",),
        )

    async def chat(
        self,
        messages: list[Any],
        params: Mapping[str, Any] | None = None,
        *,
        request_id: str = "",
        on_sent: Callable[[], None] | None = None,
    ) -> HttpOutcome:
        """One chat completion. ``on_sent`` is called once the request's headers are written to the
        connection (aiohttp's ``on_request_headers_sent``): after a connection was found or opened."""
        payload = self.wire.body(self.config, messages, params)
        return await self._post(
            self.url, self._headers, payload, self.wire, self.max_answer_bytes, request_id, on_sent
        )

    async def embed(
        self,
        embedding_input: EmbeddingInput,
        params: Mapping[str, Any] | None = None,
        *,
        request_id: str = "",
        on_sent: Callable[[], None] | None = None,
    ) -> HttpOutcome:
        """One embeddings request (the kind's ``wire.embeddings`` family: URL, body, the answer read into
        OpenAI's embeddings shape). Its answer may be larger than a chat answer: capped at
        ``ANSWER_BYTES_PER_INPUT`` per input or the engine's cap, whichever is larger."""
        try:
            request = embeddings_for_kind(self.config).request(self.config, embedding_input, params or {})
        except ValueError as exc:  # NoEmbeddings, RequestProblems: submission refuses these; never sent
            return HttpOutcome(None, 0, error_type=ErrorType.CLIENT_ERROR, message=str(exc))
        cap = max(self.max_answer_bytes, ANSWER_BYTES_PER_INPUT * request.inputs)
        headers = {**REQUEST_HEADERS, **request.headers}
        return await self._post(request.url, headers, request.body, request.reader, cap, request_id, on_sent)

    async def _post(
        self,
        url: str,
        headers: dict[str, str],
        payload: Any,
        reader: AnswerReading,
        cap: int,
        request_id: str,
        on_sent: Callable[[], None] | None,
    ) -> HttpOutcome:
        """POST one JSON body under the provider's deadline and read the answer with ``reader``."""
        if request_id:
            headers = {**headers, "X-Request-ID": request_id}
        data = json.dumps(payload).encode()
        headers = self.signed(url, headers, data)
        timeout = self.config.timeout_seconds
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(
                    self.target(url),
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    trace_request_ctx=_SentHook(on_sent) if on_sent is not None else None,
                ) as response:
                    status, resp_headers = response.status, response.headers
                    try:
                        raw = await self._read(response, cap)
                    except AnswerRejected as exc:
                        response.close()  # do not drain an unwanted body into a pooled connection
                        latency = int((time.monotonic() - started) * 1000)
                        return rejected(reader, status, latency, resp_headers, exc)
        except TimeoutError:
            return timed_out(started, timeout)
        except (aiohttp.ClientError, OSError) as exc:
            return connection_failed(started, exc)
        latency = int((time.monotonic() - started) * 1000)
        return from_answer(reader, status, latency, raw, resp_headers, self.config.api_key)

    async def open_stream(
        self,
        messages: list[Any],
        params: Mapping[str, Any] | None = None,
        *,
        request_id: str = "",
        on_sent: Callable[[], None] | None = None,
    ) -> HttpOutcome:
        """One streaming chat completion, opened (gateway_engine.http_stream): the outcome of everything
        before the first chunk, or ok with ``outcome.stream`` the open UpstreamStream."""
        from .http_stream import open_stream

        hook = _SentHook(on_sent) if on_sent is not None else None
        return await open_stream(self, self._session, messages, params, request_id=request_id, trace=hook)

    def signed(self, url: str, headers: dict[str, str], data: bytes) -> dict[str, str]:
        """``headers`` with the request's signature, for a kind whose descriptor says ``signed`` (the
        wire format's ``sign``, e.g. SigV4: over the URL, these headers and the body, per request)."""
        if not self._signed:
            return headers
        return cast(SigningWire, self.wire).sign(self.config, "POST", url, headers, data)

    def target(self, url: str) -> str | yarl.URL:
        """The URL to send to: a signed kind's exactly as signed (yarl would decode ``%3A`` in a Bedrock
        model id, and the path the provider sees would not be the one signed)."""
        return yarl.URL(url, encoded=True) if self._signed else url

    async def read_answer(self, response: aiohttp.ClientResponse) -> bytes:
        """The whole (capped, decompressed) answer body (gateway_engine.http_stream reads error answers)."""
        return await self._read(response)

    async def _read(self, response: aiohttp.ClientResponse, cap: int | None = None) -> bytes:
        limit = self.max_answer_bytes if cap is None else cap
        encoding = response.headers.get("Content-Encoding")
        if declared_too_large(response.headers.get("Content-Length"), limit, encoding):
            raise AnswerRejected(f"answer larger than {limit} bytes")
        if encoding is None and response.content_length is not None:
            return await response.read()  # identity, declared length within the cap: aiohttp stops there
        body = BoundedBody(limit, encoding)
        async for chunk in response.content.iter_chunked(READ_CHUNK):
            body.feed(chunk)
        return body.finish()

    async def aclose(self) -> None:
        await self._session.close()


class HttpClients:
    """One client per provider for the lifetime of one engine run (one event loop)."""

    def __init__(self, *, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES):
        self._clients: dict[str, AiohttpProviderClient] = {}
        self._retired: list[AiohttpProviderClient] = []
        self.max_answer_bytes = max_answer_bytes

    def get(self, config: ProviderConfig) -> AiohttpProviderClient:
        client = self._clients.get(config.name)
        if client is None or client.config != config:
            if client is not None:  # config changed mid-run: the old pool drains when closed at the end
                self._retired.append(client)
            client = AiohttpProviderClient(config, max_answer_bytes=self.max_answer_bytes)
            self._clients[config.name] = client
        return client

    async def aclose(self) -> None:
        clients = list(self._clients.values()) + self._retired
        self._clients.clear()
        self._retired = []
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)

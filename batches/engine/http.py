"""The one module that talks HTTP to providers.

One pooled keep-alive client per provider (pool ≥ the provider's max_concurrency), no hidden retries
anywhere (no SDK; aiohttp never re-sends a POST, httpx runs with transport retries=0), one hard
per-attempt deadline of the provider's ``timeout_seconds`` covering connect + send + reading the whole
answer. Every call returns an ``HttpOutcome``; nothing here raises for HTTP or network errors, and
nothing here retries.

The engine uses ``AiohttpProviderClient`` (aiohttp): against a ~1 ms provider it costs about a third
of httpx's CPU per call (httpx + httpcore + anyio write the head and the body in two socket sends and
go through several layers of context managers per request; see docs/benchmarks.md, "Overhead").
``ProviderClient`` (httpx, with the linear ``LeanConnectionPool``) is kept for callers that inject an
httpx transport (``HttpClients(transport_factory=...)``, respx in tests).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpcore
import httpx

from providers.routing import ProviderConfig

from .retry import ErrorType, error_type_for_status

KEEP_HEADERS = (
    "retry-after",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
)
MAX_MESSAGE_CHARS = 1000
RESERVED_PARAMS = ("model", "messages")


@dataclass
class HttpOutcome:
    status_code: int | None
    latency_ms: int
    body: Any = None
    error_type: str = ""  # "" when the attempt produced a usable answer
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] | None = None

    @property
    def ok(self) -> bool:
        return not self.error_type


def parse_usage(body: Any) -> dict[str, int] | None:
    """The OpenAI-style ``usage`` object, or None if the answer has none."""
    if not isinstance(body, dict) or not isinstance(body.get("usage"), dict):
        return None
    raw = body["usage"]

    def num(key: str) -> int:
        value = raw.get(key)
        return (
            int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0
        )

    prompt, completion = num("prompt_tokens"), num("completion_tokens")
    total = num("total_tokens") or prompt + completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def provider_message(body: Any, text: str) -> str:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:MAX_MESSAGE_CHARS]
        if isinstance(err, str):
            return err[:MAX_MESSAGE_CHARS]
        if body.get("message"):
            return str(body["message"])[:MAX_MESSAGE_CHARS]
    return text[:MAX_MESSAGE_CHARS]


def chat_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


class LeanConnectionPool(httpcore.AsyncConnectionPool):
    """httpcore 1.0's pool with a linear housekeeping pass.

    The stock ``_assign_requests_to_connections`` runs on every request start and end; it asks every
    idle connection ``has_expired()`` (a getpeername + poll through anyio) and recounts idle
    connections for each one (quadratic). With a pool of 16+ that was most of the engine's CPU. This
    pass is linear and re-checks an idle connection's socket at most every SOCKET_CHECK_SECONDS (a
    server that closes an idle keep-alive connection is still noticed; the request that meets such a
    connection in the meantime fails as a connection error and is retried like any other). Request
    assignment is httpcore's own logic.
    """

    SOCKET_CHECK_SECONDS = 0.25

    def _assign_requests_to_connections(self) -> list:
        checked: dict = self.__dict__.setdefault("_lean_checked", {})
        closing = []
        now = time.monotonic()
        idle = 0
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
                checked.pop(connection, None)
                continue
            if not connection.is_idle():
                continue
            if now - checked.get(connection, 0.0) >= self.SOCKET_CHECK_SECONDS:
                checked[connection] = now
                if connection.has_expired():
                    self._connections.remove(connection)
                    checked.pop(connection, None)
                    closing.append(connection)
                    continue
            idle += 1
            if idle > self._max_keepalive_connections:
                self._connections.remove(connection)
                checked.pop(connection, None)
                closing.append(connection)
        queued = [request for request in self._requests if request.is_queued()]
        for pool_request in queued:
            origin = pool_request.request.url.origin
            available = None
            idle_connection = None
            for connection in self._connections:
                if available is None and connection.can_handle_request(origin) and connection.is_available():
                    available = connection
                    break
                if idle_connection is None and connection.is_idle():
                    idle_connection = connection
            if available is not None:
                pool_request.assign_to_connection(available)
            elif len(self._connections) < self._max_connections:
                connection = self.create_connection(origin)
                self._connections.append(connection)
                pool_request.assign_to_connection(connection)
            elif idle_connection is not None:
                self._connections.remove(idle_connection)
                checked.pop(idle_connection, None)
                closing.append(idle_connection)
                connection = self.create_connection(origin)
                self._connections.append(connection)
                pool_request.assign_to_connection(connection)
        return closing


def lean_transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx's own transport (retries=0) whose pool does linear housekeeping (LeanConnectionPool)."""
    transport = httpx.AsyncHTTPTransport(retries=0, limits=limits)
    if type(transport._pool) is httpcore.AsyncConnectionPool:  # same httpcore major: swap in the lean pass
        transport._pool.__class__ = LeanConnectionPool
    return transport


class ProviderClient:
    """Pooled keep-alive client for one provider."""

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None):
        self.config = config
        self.url = chat_url(config.base_url)
        pool = max(1, config.max_concurrency)
        limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool, keepalive_expiry=30.0)
        headers = {"Content-Type": "application/json", "User-Agent": "batch-gateway/1"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.AsyncClient(
            transport=transport or lean_transport(limits),
            timeout=httpx.Timeout(config.timeout_seconds),
            headers=headers,
            follow_redirects=False,
        )

    async def chat(self, messages: list, params: dict | None = None, *, request_id: str = "") -> HttpOutcome:
        payload = {"model": self.config.model, "messages": messages}
        payload.update({k: v for k, v in (params or {}).items() if k not in RESERVED_PARAMS})
        extra = {"X-Request-ID": request_id} if request_id else None
        timeout = self.config.timeout_seconds
        started = time.monotonic()

        def elapsed_ms() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            async with asyncio.timeout(timeout):
                response = await self._client.post(self.url, json=payload, headers=extra)
        except (TimeoutError, httpx.TimeoutException):
            return HttpOutcome(
                None,
                elapsed_ms(),
                error_type=ErrorType.TIMEOUT,
                message=f"no complete answer within {timeout:g} s",
            )
        except httpx.HTTPError as exc:
            return HttpOutcome(
                None,
                elapsed_ms(),
                error_type=ErrorType.CONNECTION_ERROR,
                message=f"{type(exc).__name__}: {exc}"[:MAX_MESSAGE_CHARS],
            )
        return _outcome(
            response.status_code, elapsed_ms(), response.content, response.charset_encoding, response.headers
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _outcome(status: int, latency: int, raw: bytes, charset: str | None, headers) -> HttpOutcome:
    """An HttpOutcome from a complete answer (status, body bytes, response headers)."""
    kept = {h: headers[h] for h in KEEP_HEADERS if h in headers}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    usage = parse_usage(body)
    if 200 <= status < 300:
        if not isinstance(body, dict):
            text = raw.decode(charset or "utf-8", errors="replace")
            return HttpOutcome(
                status,
                latency,
                body=None,
                error_type=ErrorType.INVALID_RESPONSE,
                message=f"answer is not a JSON object: {text[:200]!r}",
                headers=kept,
            )
        return HttpOutcome(status, latency, body=body, headers=kept, usage=usage)
    text = raw.decode(charset or "utf-8", errors="replace")
    return HttpOutcome(
        status,
        latency,
        body=body if isinstance(body, dict) else None,
        error_type=error_type_for_status(status),
        message=provider_message(body, text) or f"HTTP {status}",
        headers=kept,
        usage=usage,
    )


class AiohttpProviderClient:
    """Pooled keep-alive aiohttp client for one provider (same contract as ProviderClient).

    Create it inside the event loop that will use it. aiohttp re-sends nothing: a request on a
    keep-alive connection the server has closed fails as a connection error (retried by the engine
    like any other), only idempotent methods would be retried by aiohttp itself and this is a POST.
    """

    def __init__(self, config: ProviderConfig):
        self.config = config
        self.url = chat_url(config.base_url)
        pool = max(1, config.max_concurrency)
        self._headers = {"Content-Type": "application/json", "User-Agent": "batch-gateway/1"}
        if config.api_key:
            self._headers["Authorization"] = f"Bearer {config.api_key}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool, limit_per_host=0, keepalive_timeout=30.0),
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),  # the deadline is asyncio.timeout below
            auto_decompress=True,
        )

    async def chat(self, messages: list, params: dict | None = None, *, request_id: str = "") -> HttpOutcome:
        payload = {"model": self.config.model, "messages": messages}
        payload.update({k: v for k, v in (params or {}).items() if k not in RESERVED_PARAMS})
        headers = self._headers
        if request_id:
            headers = {**headers, "X-Request-ID": request_id}
        data = json.dumps(payload).encode()
        timeout = self.config.timeout_seconds
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(
                    self.url, data=data, headers=headers, allow_redirects=False
                ) as response:
                    raw = await response.read()
                    status, charset, resp_headers = response.status, response.charset, response.headers
        except TimeoutError:
            return HttpOutcome(
                None,
                int((time.monotonic() - started) * 1000),
                error_type=ErrorType.TIMEOUT,
                message=f"no complete answer within {timeout:g} s",
            )
        except (aiohttp.ClientError, OSError) as exc:
            return HttpOutcome(
                None,
                int((time.monotonic() - started) * 1000),
                error_type=ErrorType.CONNECTION_ERROR,
                message=f"{type(exc).__name__}: {exc}"[:MAX_MESSAGE_CHARS],
            )
        latency = int((time.monotonic() - started) * 1000)
        return _outcome(status, latency, raw, charset, resp_headers)

    async def aclose(self) -> None:
        await self._session.close()


class HttpClients:
    """One client per provider for the lifetime of one engine run (one event loop): aiohttp, or the
    httpx ProviderClient when a transport_factory (config -> httpx transport) is given."""

    def __init__(self, transport_factory=None):
        self._clients: dict[str, AiohttpProviderClient | ProviderClient] = {}
        self._transport_factory = transport_factory

    def get(self, config: ProviderConfig) -> AiohttpProviderClient | ProviderClient:
        client = self._clients.get(config.name)
        if client is None or client.config != config:
            if client is not None:  # config changed mid-run: the old pool drains when closed at the end
                self._retired = getattr(self, "_retired", []) + [client]
            if self._transport_factory is not None:
                client = ProviderClient(config, transport=self._transport_factory(config))
            else:
                client = AiohttpProviderClient(config)
            self._clients[config.name] = client
        return client

    async def aclose(self) -> None:
        clients = list(self._clients.values()) + getattr(self, "_retired", [])
        self._clients.clear()
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)

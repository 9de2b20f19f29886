"""The client's HTTP layer: one ``_Transport`` (the httpx clients, sync and async, and the retry policy of
the client's own calls, described in client.py's docstring), the chat streams, and the small helpers
they share. ``Gateway`` (client.py) is built on it; nothing here is public but the streams."""

from __future__ import annotations

import asyncio
import enum
import json
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx

from ._version import __version__
from .errors import (
    APIConnectionError,
    APITimeoutError,
    GatewayError,
    StreamError,
    error_from_response,
    parse_retry_after,
)

DEFAULT_TIMEOUT_S = 60.0  # covers the interactive lane's longest wait for quota (30 s) plus an answer
DEFAULT_RETRIES = 3
DEFAULT_MAX_RETRY_AFTER_S = 60.0
DEFAULT_POLL_INTERVAL_S = 2.0
FIRST_POLL_S = 0.2  # polling starts fast and slows down by half each time, up to poll_interval

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class _Retry(enum.Enum):
    SAFE = "safe"  # may be sent again after any transport error or a 502/503/504
    ONCE = "once"  # only retried when it surely stored nothing (no connection, 429/503 + Retry-After)


def _base(url: str) -> str:
    url = url.rstrip("/")
    for tail in ("/api/v1", "/v1"):  # an OpenAI-style base URL names the same gateway
        if url.endswith(tail):
            return url[: -len(tail)]
    return url


def _connection_error(exc: httpx.HTTPError, request: httpx.Request | None = None) -> APIConnectionError:
    where = f" ({request.method} {request.url})" if request is not None else ""
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    return cls(f"{type(exc).__name__}{where}: {exc}")


_DONE = object()


def _sse_event(line: str) -> Any:
    """One line of the chat stream: a chunk dict, _DONE, or None (not a data line)."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    chunk = json.loads(data)
    if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
        error = chunk["error"]
        raise StreamError(error if isinstance(error, dict) else {"message": str(error)})
    return chunk


class ChatStream:
    """The chunks (``chat.completion.chunk`` dicts) of a streamed chat call, as they arrive. Iterate it
    once; ``close()`` (or leaving a ``with`` block) ends the call early. ``provider`` is the provider
    that answers."""

    def __init__(self, response: httpx.Response):
        self.response = response
        self.headers = response.headers
        self.provider = response.headers.get("x-gateway-provider")

    def __iter__(self) -> Iterator[dict]:
        try:
            for line in self.response.iter_lines():
                event = _sse_event(line)
                if event is _DONE:
                    return
                if event is not None:
                    yield event
        except httpx.HTTPError as exc:
            raise _connection_error(exc, self.response.request) from exc
        finally:
            self.response.close()
        raise APIConnectionError("the chat stream ended without [DONE]")

    def close(self) -> None:
        self.response.close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChatStream:
    """``ChatStream`` for ``achat(stream=True)``: ``async for chunk in stream``."""

    def __init__(self, response: httpx.Response):
        self.response = response
        self.headers = response.headers
        self.provider = response.headers.get("x-gateway-provider")

    async def __aiter__(self) -> AsyncIterator[dict]:
        try:
            async for line in self.response.aiter_lines():
                event = _sse_event(line)
                if event is _DONE:
                    return
                if event is not None:
                    yield event
        except httpx.HTTPError as exc:
            raise _connection_error(exc, self.response.request) from exc
        finally:
            await self.response.aclose()
        raise APIConnectionError("the chat stream ended without [DONE]")

    async def aclose(self) -> None:
        await self.response.aclose()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Transport:
    """The HTTP side of a ``Gateway``: its httpx clients and how one call is sent (and repeated)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER_S,
        poll_interval: float = DEFAULT_POLL_INTERVAL_S,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ):
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.base_url = _base(base_url)
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.retries = retries
        self.max_retry_after = max_retry_after
        self.poll_interval = poll_interval
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": f"batch-gateway-client/{__version__}",
            **(headers or {}),
        }
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=self.timeout, transport=transport
        )
        self._async_transport = async_transport
        self._async: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None

    # --- plumbing ---------------------------------------------------------------------------------

    def _delay(
        self, attempt: int, policy: _Retry, response: httpx.Response | None, exc: Exception | None
    ) -> float | None:
        """Seconds to wait before sending the request again, or None to give up."""
        if attempt >= self.retries:
            return None
        if exc is not None:
            if isinstance(exc, httpx.UnsupportedProtocol):
                return None
            if isinstance(exc, _NOT_SENT) or policy is _Retry.SAFE:
                return self._backoff(attempt)
            return None
        assert response is not None
        if response.headers.get("x-should-retry", "").lower() == "false":
            return None
        status = response.status_code
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        if status in (429, 503) and retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        if policy is _Retry.SAFE and status in (502, 503, 504):
            return self._backoff(attempt)
        return None

    @staticmethod
    def _backoff(attempt: int) -> float:
        return min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2)

    def _build(
        self, client: httpx.Client | httpx.AsyncClient, method: str, path: str, **kw: Any
    ) -> httpx.Request:
        if kw.get("timeout") is None:
            kw.pop("timeout", None)
        return client.build_request(method, path, **kw)

    def _send(
        self, method: str, path: str, *, policy: _Retry, stream: bool = False, **kw: Any
    ) -> httpx.Response:
        attempt = 0
        while True:
            request = self._build(self._http, method, path, **kw)
            try:
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                delay = self._delay(attempt, policy, None, exc)
                if delay is None:
                    raise _connection_error(exc, request) from exc
            else:
                if response.status_code < 400:
                    return response
                try:
                    response.read()
                finally:
                    response.close()
                delay = self._delay(attempt, policy, response, None)
                if delay is None:
                    raise error_from_response(response)
            attempt += 1
            time.sleep(delay)

    def _aclient(self) -> httpx.AsyncClient:
        # an AsyncClient's connections belong to one event loop: a new loop (another asyncio.run) gets
        # a client of its own
        loop = asyncio.get_running_loop()
        if self._async is None or self._async_loop is not loop:
            self._async = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._headers,
                timeout=self.timeout,
                transport=self._async_transport,
            )
            self._async_loop = loop
        return self._async

    async def _asend(
        self, method: str, path: str, *, policy: _Retry, stream: bool = False, **kw: Any
    ) -> httpx.Response:
        client = self._aclient()
        attempt = 0
        while True:
            request = self._build(client, method, path, **kw)
            try:
                response = await client.send(request, stream=stream)
            except httpx.TransportError as exc:
                delay = self._delay(attempt, policy, None, exc)
                if delay is None:
                    raise _connection_error(exc, request) from exc
            else:
                if response.status_code < 400:
                    return response
                try:
                    await response.aread()
                finally:
                    await response.aclose()
                delay = self._delay(attempt, policy, response, None)
                if delay is None:
                    raise error_from_response(response)
            attempt += 1
            await asyncio.sleep(delay)

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise GatewayError(f"{response.request.method} {response.request.url.path}: not JSON") from exc

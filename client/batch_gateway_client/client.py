"""``Gateway``: the REST API (``/api/v1/``) and the interactive lane (``/v1/chat/completions``) of one
gateway, over httpx. docs/client.md is the guide; docs/api.md and docs/interactive.md describe the
endpoints.

Retries of the client's own HTTP calls (``retries`` times at most, per call):

* a connection that could not be made (nothing was sent) is retried for every request;
* a ``429`` or ``503`` answer carrying ``Retry-After`` (at most ``max_retry_after`` seconds) is retried
  for every request, after that wait: the gateway answers so only when it stored and sent nothing
  (the key's throttle, the team's queue limits, a dependency down, the interactive lane's queue
  timeout); ``x-should-retry: false`` (a spent budget) is never retried;
* any other transport error (a timeout, a connection broken after the request went out) and a
  502/503/504 without ``Retry-After`` are retried only for requests that are safe to repeat: GETs,
  cancel, and a submission that carries an ``Idempotency-Key`` (``submit`` sends a new one per call
  by default, so a repeat returns the first batch instead of storing a second one). A submission
  without a key and a chat call are never sent twice after their request went out.
"""

from __future__ import annotations

import asyncio
import enum
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import date
from typing import Any

import httpx

from ._progress import FINISHED, Progress
from ._version import __version__
from .errors import (
    APIConnectionError,
    APITimeoutError,
    BatchWaitTimeout,
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


def _messages(messages: str | Sequence[Mapping[str, Any]]) -> list[dict]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


def _idempotency_key(value: str | bool) -> str | None:
    if value is True:
        return f"bgwc-{uuid.uuid4().hex}"
    if value is False or value is None or value == "":
        return None
    return str(value)


def with_custom_ids(items: Iterable[Mapping[str, Any]]) -> list[dict]:
    """The items as a list of dicts; an item without ``custom_id`` gets its 0-based position as one
    (``"0"``, ``"1"`` ...)."""
    out = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            out.append(item)  # the gateway names it (field "item")
            continue
        item = dict(item)
        item.setdefault("custom_id", str(index))
        out.append(item)
    return out


def in_input_order(items: Sequence[Any], results: Iterable[dict]) -> list[dict]:
    """The RESULTs, one per item, in the items' order (matched by custom_id)."""
    by_id = {r.get("custom_id"): r for r in results}
    missing = [item["custom_id"] for item in items if item["custom_id"] not in by_id]
    if missing:
        raise GatewayError(f"the gateway returned no RESULT for {len(missing)} item(s), e.g. {missing[0]!r}")
    return [by_id[item["custom_id"]] for item in items]


def ended(batch: Mapping[str, Any]) -> bool:
    """The batch is final: a finished status and (a cancelled batch's in-flight items having answered)
    its completed_at written."""
    return batch.get("status") in FINISHED and batch.get("completed_at", True) is not None


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


class Gateway:
    """A client of one gateway for one team (its API key).

    ``base_url`` is the gateway's root (``http://host:8000``; a trailing ``/v1`` or ``/api/v1`` is
    dropped). ``timeout`` (seconds, or an ``httpx.Timeout``) bounds each HTTP call; ``retries`` is how
    many times one call may be repeated (see the module's docstring for when); a ``Retry-After`` longer
    than ``max_retry_after`` seconds is raised instead of waited for. ``poll_interval`` is the longest
    pause between two reads of a batch being waited for. ``transport`` / ``async_transport`` replace
    httpx's (tests, proxies).
    """

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

    @staticmethod
    def _submission(items: Iterable[Mapping[str, Any]], options: Mapping[str, Any], key: str | bool):
        body: dict[str, Any] = {"items": with_custom_ids(items)}
        body.update({name: value for name, value in options.items() if value is not None})
        headers = {"Content-Type": "application/json"}
        idempotency = _idempotency_key(key)
        if idempotency:
            headers["Idempotency-Key"] = idempotency
        # encoded once: a retry sends the very same bytes (the gateway hashes them with the key)
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        return body["items"], content, headers, _Retry.SAFE if idempotency else _Retry.ONCE

    @staticmethod
    def _results_params(status: str | Sequence[str] | None, native: bool) -> dict[str, str]:
        params = {"format": "jsonl"}
        if status:
            params["status"] = status if isinstance(status, str) else ",".join(status)
        if native:
            params["include"] = "native"
        return params

    @staticmethod
    def _chat_request(
        model: str,
        messages: Any,
        stream: bool,
        max_wait: float | None,
        timeout: Any,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        body = {"model": model, "messages": _messages(messages), **params}
        if stream:
            body["stream"] = True
        headers = {"X-Gateway-Max-Wait": f"{max_wait:g}"} if max_wait is not None else None
        return {"json": body, "headers": headers, "timeout": timeout}

    # --- batches ----------------------------------------------------------------------------------

    def submit(
        self, items: Iterable[Mapping[str, Any]], *, idempotency_key: str | bool = True, **options: Any
    ) -> dict:
        """``POST /api/v1/batches``: store the items as one batch and return the batch object (status
        ``queued``). ``options`` are the batch's top-level fields, sent only when given (not None):
        ``metadata``, ``priority``, ``completion_window``, ``provider_batch``, ``cache``, ``webhook_url``
        (the gateway refuses a name it does not know, naming it). Items without ``custom_id`` get their
        position. ``idempotency_key``: True (default) sends a new key, so retrying the call is safe; a
        string sends that key (a repeat of the same request returns the first batch); False sends none
        (then the request is never sent twice). An invalid item raises ``BadRequestError`` whose
        ``errors`` name each item and field; nothing is stored."""
        _, content, headers, policy = self._submission(items, options, idempotency_key)
        return self._json(
            self._send("POST", "/api/v1/batches", content=content, headers=headers, policy=policy)
        )

    async def asubmit(
        self, items: Iterable[Mapping[str, Any]], *, idempotency_key: str | bool = True, **options: Any
    ) -> dict:
        """``submit`` for asyncio."""
        _, content, headers, policy = self._submission(items, options, idempotency_key)
        response = await self._asend(
            "POST", "/api/v1/batches", content=content, headers=headers, policy=policy
        )
        return self._json(response)

    def retrieve(self, batch_id: str) -> dict:
        """``GET /api/v1/batches/{id}``: the batch object."""
        return self._json(self._send("GET", f"/api/v1/batches/{batch_id}", policy=_Retry.SAFE))

    async def aretrieve(self, batch_id: str) -> dict:
        return self._json(await self._asend("GET", f"/api/v1/batches/{batch_id}", policy=_Retry.SAFE))

    def wait(self, batch_id: str, *, progress: bool = False, wait_timeout: float | None = None) -> dict:
        """Poll the batch until it ended (``completed``, ``failed``, ``cancelled``, ``expired``, with
        nothing left in flight) and return its object. ``progress`` draws a bar on stderr.
        ``wait_timeout`` (seconds) raises ``BatchWaitTimeout``; the batch goes on at the gateway."""
        bar = Progress(progress)
        deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
        interval = FIRST_POLL_S
        try:
            while True:
                batch = self.retrieve(batch_id)
                bar.update(batch)
                if ended(batch):
                    return batch
                pause = self._pause(interval, deadline, batch)
                time.sleep(pause)
                interval = min(interval * 1.5, self.poll_interval)
        finally:
            bar.close()

    async def wait_async(
        self, batch_id: str, *, progress: bool = False, wait_timeout: float | None = None
    ) -> dict:
        """``wait`` for asyncio."""
        bar = Progress(progress)
        deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
        interval = FIRST_POLL_S
        try:
            while True:
                batch = await self.aretrieve(batch_id)
                bar.update(batch)
                if ended(batch):
                    return batch
                await asyncio.sleep(self._pause(interval, deadline, batch))
                interval = min(interval * 1.5, self.poll_interval)
        finally:
            bar.close()

    @staticmethod
    def _pause(interval: float, deadline: float | None, batch: dict) -> float:
        if deadline is None:
            return interval
        left = deadline - time.monotonic()
        if left <= 0:
            raise BatchWaitTimeout(
                f"batch {batch.get('id')} still {batch.get('status')} after the wait timeout; it goes on running",
                batch,
            )
        return min(interval, left)

    def batch(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        wait: bool = True,
        progress: bool = True,
        wait_timeout: float | None = None,
        idempotency_key: str | bool = True,
        **options: Any,
    ) -> Any:
        """Submit the items as one batch (``submit``'s options), wait until it ended (``wait``'s
        ``progress`` and ``wait_timeout``) and return its RESULTs, one per item, **in input order**.
        With ``wait=False``: return the batch object at once (read the RESULTs later with
        ``results``)."""
        prepared, content, headers, policy = self._submission(items, options, idempotency_key)
        created = self._json(
            self._send("POST", "/api/v1/batches", content=content, headers=headers, policy=policy)
        )
        if not wait:
            return created
        self.wait(created["id"], progress=progress, wait_timeout=wait_timeout)
        return in_input_order(prepared, self.results(created["id"]))

    async def abatch(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        wait: bool = True,
        progress: bool = True,
        wait_timeout: float | None = None,
        idempotency_key: str | bool = True,
        **options: Any,
    ) -> Any:
        """``batch`` for asyncio: the same batch, the same RESULTs in input order."""
        prepared, content, headers, policy = self._submission(items, options, idempotency_key)
        response = await self._asend(
            "POST", "/api/v1/batches", content=content, headers=headers, policy=policy
        )
        created = self._json(response)
        if not wait:
            return created
        await self.wait_async(created["id"], progress=progress, wait_timeout=wait_timeout)
        return in_input_order(prepared, [r async for r in self.aresults(created["id"])])

    def results(
        self, batch_id: str, status: str | Sequence[str] | None = None, *, native: bool = False
    ) -> Iterator[dict]:
        """The batch's RESULTs in submission order, streamed from ``GET .../results?format=jsonl``
        (constant memory; the request goes out when iteration starts). ``status`` keeps only items in
        those states (``"failed"``, ``["failed", "cancelled"]``); ``native`` adds ``native_response``.
        Items not finished yet have ``ok`` false and an ``error.type`` of ``pending`` or ``running``."""
        response = self._send(
            "GET",
            f"/api/v1/batches/{batch_id}/results",
            params=self._results_params(status, native),
            policy=_Retry.SAFE,
            stream=True,
        )
        try:
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)
        except httpx.HTTPError as exc:
            raise _connection_error(exc, response.request) from exc
        finally:
            response.close()

    async def aresults(
        self, batch_id: str, status: str | Sequence[str] | None = None, *, native: bool = False
    ) -> AsyncIterator[dict]:
        """``results`` for asyncio: ``async for result in gateway.aresults(batch_id)``."""
        response = await self._asend(
            "GET",
            f"/api/v1/batches/{batch_id}/results",
            params=self._results_params(status, native),
            policy=_Retry.SAFE,
            stream=True,
        )
        try:
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)
        except httpx.HTTPError as exc:
            raise _connection_error(exc, response.request) from exc
        finally:
            await response.aclose()

    def cancel(self, batch_id: str) -> dict:
        """``POST /api/v1/batches/{id}/cancel``: items not sent yet are cancelled, those in flight
        finish; returns the batch object (status ``cancelled``). A finished batch is left as it is."""
        return self._json(self._send("POST", f"/api/v1/batches/{batch_id}/cancel", policy=_Retry.SAFE))

    async def acancel(self, batch_id: str) -> dict:
        return self._json(await self._asend("POST", f"/api/v1/batches/{batch_id}/cancel", policy=_Retry.SAFE))

    def usage(
        self,
        group_by: str | None = None,
        *,
        date_from: date | str | None = None,
        date_to: date | str | None = None,
    ) -> dict:
        """``GET /api/v1/usage``: the team's token usage, ``group_by`` ``"day"`` (the gateway's default)
        or ``"provider"``, between two dates (inclusive)."""
        params = {
            name: value.isoformat() if isinstance(value, date) else value
            for name, value in (("group_by", group_by), ("from", date_from), ("to", date_to))
            if value is not None
        }
        return self._json(self._send("GET", "/api/v1/usage", params=params, policy=_Retry.SAFE))

    # --- the interactive lane ---------------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        stream: bool = False,
        max_wait: float | None = None,
        timeout: float | httpx.Timeout | None = None,
        **params: Any,
    ) -> Any:
        """One interactive call, ``POST /v1/chat/completions``: ``model`` names a route (else a
        provider); ``messages`` is the OpenAI list (a string is one user message); ``params``
        (``max_tokens``, ``temperature`` ...) go into the body. Returns the ``chat.completion`` dict;
        with ``stream=True`` a ``ChatStream`` of ``chat.completion.chunk`` dicts. ``max_wait`` sends
        ``X-Gateway-Max-Wait`` (how long the call may wait for quota; a longer wait is a
        ``RateLimitError`` with code ``gateway_queue_timeout``); ``timeout`` overrides the client's for
        this call. Never sent twice once the request went out."""
        request = self._chat_request(model, messages, stream, max_wait, timeout, params)
        response = self._send("POST", "/v1/chat/completions", policy=_Retry.ONCE, stream=stream, **request)
        return ChatStream(response) if stream else self._json(response)

    async def achat(
        self,
        model: str,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        stream: bool = False,
        max_wait: float | None = None,
        timeout: float | httpx.Timeout | None = None,
        **params: Any,
    ) -> Any:
        """``chat`` for asyncio (``AsyncChatStream`` with ``stream=True``)."""
        request = self._chat_request(model, messages, stream, max_wait, timeout, params)
        response = await self._asend(
            "POST", "/v1/chat/completions", policy=_Retry.ONCE, stream=stream, **request
        )
        return AsyncChatStream(response) if stream else self._json(response)

    def models(self) -> list[dict]:
        """``GET /v1/models``: the routes (``owned_by: "route"``) and enabled providers
        (``owned_by: "provider:<kind>"``), each a valid ``model``."""
        return self._json(self._send("GET", "/v1/models", policy=_Retry.SAFE))["data"]

    async def amodels(self) -> list[dict]:
        return self._json(await self._asend("GET", "/v1/models", policy=_Retry.SAFE))["data"]

    # --- life cycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Gateway({self.base_url!r})"

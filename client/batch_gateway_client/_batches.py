"""The batch half of ``Gateway`` (client.py): submit, retrieve, wait, results, cancel, usage, and the
helpers that shape their requests and read their answers."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import date
from typing import Any

import httpx

from ._http import FIRST_POLL_S, _connection_error, _Retry, _Transport
from ._progress import FINISHED, Progress
from .errors import (
    BatchWaitTimeout,
    GatewayError,
)


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
    """The RESULTs, one per item, in the items' order (matched by custom_id); an evaluation's (a batch
    with ``targets``): one per item and target, each item's side by side in the gateway's order."""
    by_id: dict[Any, list[dict]] = {}
    for r in results:
        by_id.setdefault(r.get("custom_id"), []).append(r)
    missing = [item["custom_id"] for item in items if item["custom_id"] not in by_id]
    if missing:
        raise GatewayError(f"the gateway returned no RESULT for {len(missing)} item(s), e.g. {missing[0]!r}")
    return [r for item in items for r in by_id[item["custom_id"]]]


def ended(batch: Mapping[str, Any]) -> bool:
    """The batch is final: a finished status and (a cancelled batch's in-flight items having answered)
    its completed_at written."""
    return batch.get("status") in FINISHED and batch.get("completed_at", True) is not None


class _BatchCalls(_Transport):
    """``Gateway``'s REST calls on batches (``/api/v1/``), sync and async."""

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

    # --- batches ----------------------------------------------------------------------------------

    def submit(
        self, items: Iterable[Mapping[str, Any]], *, idempotency_key: str | bool = True, **options: Any
    ) -> dict:
        """``POST /api/v1/batches``: store the items as one batch and return the batch object (status
        ``queued``). ``options`` are the batch's top-level fields, sent only when given (not None):
        ``metadata``, ``priority``, ``completion_window``, ``provider_batch``, ``cache``, ``webhook_url``,
        ``steps`` (a pipeline: a list of ``{"name", "route" | "provider", "template", "params",
        "route_by"}``; each item runs through them in order and its RESULT gains ``steps``), ``targets``
        (an evaluation: route or provider names; each item, without its own route or provider, is sent to
        every one, its RESULTs gain ``target``; see ``comparison``) (the gateway refuses a name it does
        not know, naming it). Items without ``custom_id`` get their
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

    def comparison(self, batch_id: str) -> dict:
        """``GET /api/v1/batches/{id}/comparison``: an evaluation's (a batch submitted with ``targets``)
        figures per target (ok, failed, requests, p50/p95 latency, tokens, cost) and agreement per pair."""
        path = f"/api/v1/batches/{batch_id}/comparison"
        return self._json(self._send("GET", path, policy=_Retry.SAFE))

    async def acomparison(self, batch_id: str) -> dict:
        path = f"/api/v1/batches/{batch_id}/comparison"
        return self._json(await self._asend("GET", path, policy=_Retry.SAFE))

    def comparison_csv(self, batch_id: str) -> str:
        """The comparison's CSV (``?format=csv``): one row per custom_id, each target's ok, answer,
        latency and tokens (an error status raises as every call does)."""
        path = f"/api/v1/batches/{batch_id}/comparison"
        response = self._send("GET", path, params={"format": "csv"}, policy=_Retry.SAFE)
        return response.text

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

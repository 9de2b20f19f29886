"""What an interactive call leaves behind: a request-log row (interactive.models.InteractiveCall) and
its share of the team's daily usage (batches.models.TeamUsageDaily: requests, items, tokens, cache
parts — the same table the usage API, the dashboards and the budget re-seed read). The team budget and
the provider buckets were already settled by the engine, in Redis, before the answer left.

Rows are written in bulk: ``CallLog.add`` queues a record on the event loop, a flusher writes what is
queued every FLUSH_SECONDS (or FLUSH_ROWS at once) in one transaction, in a thread. A process killed
with records queued loses at most FLUSH_SECONDS of log rows and usage counts (never the budget, which
lives in the shared ledger); a stopping server flushes (the ASGI lifespan's shutdown)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, close_old_connections, transaction

from batches.execution.finalize import upsert_team_usage
from gateway_engine.items import ItemResult

from .models import InteractiveCall

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5
FLUSH_ROWS = 500


@dataclass
class CallRecord:
    call_id: str
    created_at: dt.datetime
    team_id: int
    api_key_id: int | None
    model: str
    route: str
    stream: bool
    http_status: int
    result: ItemResult
    latency_ms: int
    queue_ms: int | None
    request_body: Any = None
    response_body: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    endpoint: str = "chat"  # the surface the call came in on (gateway_engine.endpoints)

    def row(self) -> InteractiveCall:
        r = self.result
        wasted = sum(e.get("tokens", 0) for e in r.attempt_log if not e.get("used"))
        return InteractiveCall(
            call_id=self.call_id, created_at=self.created_at, team_id=self.team_id, api_key_id=self.api_key_id,
            model=self.model[:200], route=self.route, provider=r.provider, stream=self.stream, endpoint=self.endpoint,
            status=r.status, http_status=self.http_status, error_type=r.error_type,
            error_message=r.error_message[:2000], attempts=r.attempts, latency_ms=self.latency_ms,
            queue_ms=self.queue_ms, prompt_tokens=r.prompt_tokens or 0, completion_tokens=r.completion_tokens or 0,
            cached_tokens=r.cached_tokens or 0, wasted_tokens=wasted,
            attempt_log=[{k: v for k, v in e.items() if k != "detail"} for e in r.attempt_log],
            request_body=self.request_body, response_body=self.response_body,
        )  # fmt: skip


def usage_rows(records: list[CallRecord]) -> list[tuple]:
    """TeamUsageDaily increments per (team, provider, endpoint, day) of these calls: every attempt is a
    request billed at its provider; the call counts as an item of the provider that gave its final answer."""
    sums: dict[tuple[int, str, dt.date, str], list[int]] = defaultdict(lambda: [0] * 8)
    for record in records:
        day, result, endpoint = record.created_at.date(), record.result, record.endpoint
        for entry in result.attempt_log:
            s = sums[(record.team_id, entry["provider"], day, endpoint)]
            s[0] += 1
            s[3] += entry.get("prompt_tokens", 0)
            s[4] += entry.get("completion_tokens", 0)
            if not entry.get("used"):
                s[5] += entry.get("tokens", 0)
            s[6] += entry.get("cached_tokens", 0)
        if result.provider and result.attempts:
            s = sums[(record.team_id, result.provider, day, endpoint)]
            s[1 if result.ok else 2] += 1
            s[7] += result.cache_write_tokens or 0
    # the provider-batch parts are 0 (the interactive lane is real time), the endpoint comes last
    return [(team, provider, day, *s, 0, 0, endpoint) for (team, provider, day, endpoint), s in sums.items()]


def write(records: list[CallRecord]) -> None:
    """The log rows and the usage increments of ``records``, in one transaction (sync: a thread)."""
    try:
        try:
            _write(records)
        except IntegrityError:  # e.g. a team deleted since its call: write the others one by one
            for record in records:
                try:
                    _write([record])
                except IntegrityError:
                    log.warning("interactive call %s not recorded: its team or key is gone", record.call_id)
    finally:
        close_old_connections()


def _write(records: list[CallRecord]) -> None:
    rows = sorted(usage_rows(records))  # one order for every writer: no deadlock between processes
    with transaction.atomic():
        InteractiveCall.objects.bulk_create([r.row() for r in records], ignore_conflicts=True)
        upsert_team_usage(rows)


class CallLog:
    """The queued records of one event loop and their flusher."""

    def __init__(self) -> None:
        self._queued: list[CallRecord] = []
        self._flusher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def add(self, record: CallRecord) -> None:
        self._queued.append(record)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._run())
        if len(self._queued) >= FLUSH_ROWS:
            self._wake.set()

    async def _run(self) -> None:
        while self._queued:
            try:
                await asyncio.wait_for(self._wake.wait(), FLUSH_SECONDS)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Write everything queued now (a failed write is retried on the next flush, then dropped)."""
        records, self._queued = self._queued, []
        if not records:
            return
        try:
            await sync_to_async(write, thread_sensitive=False)(records)
        except Exception:  # noqa: BLE001 - the database is down: keep them for one more try
            log.exception("could not write %d interactive call record(s); retrying once", len(records))
            if not any(r.extra.get("retried") for r in records):
                for r in records:
                    r.extra["retried"] = True
                self._queued = records + self._queued
            await asyncio.sleep(1.0)


_logs: dict[int, CallLog] = {}


def call_log() -> CallLog:
    """This event loop's call log."""
    loop = asyncio.get_running_loop()
    found = _logs.get(id(loop))
    if found is None:
        found = _logs[id(loop)] = CallLog()
    return found

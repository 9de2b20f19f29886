"""The bridge between a synchronous caller (a Celery task, a thread) and the async engine.

``EngineThread`` runs ``CrossProviderBatcher.abatch`` on its own event loop in a helper thread; the
calling thread receives each finished item (``collect``), stores it, and only then lets the engine
release the item's in-flight slot (``resolve``) — "sent but not recorded" never exceeds the cap.

``run_claimed`` runs a fixed list of claimed items of one batch this way (used by ``execute_chunk``,
kept for direct use and old queued tasks); the dispatcher runs a streaming source through the same
thread (batches.execution.dispatcher).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from batches.models import Batch, BatchItem, BatchStatus
from gateway_engine import CrossProviderBatcher, ItemResult, RunControl

from .apply import apply_results
from .cache_stage import CacheStage
from .claims import cancel_claimable, claim_items, release_claims, renew_claims
from .common import log, new_owner
from .engine_wiring import build_batcher, load_routing_table, work_item
from .finalize import finalize_batch_if_done, snapshot_progress
from .results import WRITE_BATCH_ROWS
from .served import as_served

CANCEL_POLL_SECONDS = 0.5
WRITE_GATHER_SECONDS = 0.01  # group commit: gather results for up to 10 ms per write

Entry = tuple[int, ItemResult, asyncio.Future]


@dataclass
class ChunkReport:
    claimed: int = 0
    written: int = 0
    dropped: int = 0  # results for items this worker no longer owned (its claim had expired)
    finalized: bool = False


def _resolve(fut: asyncio.Future, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


class EngineThread:
    """One engine run on a helper thread; finished items arrive in this thread via ``collect``."""

    def __init__(
        self,
        batcher: CrossProviderBatcher,
        items: Iterable[Any] | AsyncIterable[Any],
        *,
        name: str,
        batch_id: str = "",
        control: RunControl | None = None,
    ):
        self.batcher = batcher
        self.items = items
        self.batch_id = batch_id
        self.control = control
        self.cancel = threading.Event()
        self.inbox: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.finished = False
        self.thread = threading.Thread(target=self._target, name=name, daemon=True)

    def start(self) -> EngineThread:
        self.thread.start()
        return self

    async def _on_result(self, index: int, result: ItemResult) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.inbox.put((index, result, fut))
        await fut  # the in-flight slot stays held until the result is stored

    async def _main(self) -> None:
        batcher = self.batcher
        try:
            await batcher.abatch(
                self.items,
                on_result=self._on_result,
                should_cancel=self.cancel.is_set,
                batch_id=self.batch_id,
                control=self.control,
            )
        finally:
            for closeable in (batcher.store, batcher.breaker):
                try:
                    await closeable.aclose()
                except Exception:  # noqa: BLE001
                    log.warning("closing %r failed", closeable, exc_info=True)

    def _target(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # re-raised in the calling thread by join()
            self.error = exc
        finally:
            self.inbox.put(None)

    def collect(self, timeout: float = 0.2) -> list[Entry]:
        """Finished items: wait up to ``timeout`` for the first, then gather what finishes within a few
        ms (group commit), at most WRITE_BATCH_ROWS. Sets ``finished`` when the run has ended."""
        entries: list = []
        try:
            entries.append(self.inbox.get(timeout=timeout))
            gather_until = time.monotonic() + WRITE_GATHER_SECONDS
            while entries[-1] is not None and len(entries) < WRITE_BATCH_ROWS:
                wait = gather_until - time.monotonic()
                entries.append(self.inbox.get(timeout=wait) if wait > 0 else self.inbox.get_nowait())
        except queue.Empty:
            pass
        if None in entries:
            self.finished = True
            entries = [e for e in entries if e is not None]
        return entries

    @staticmethod
    def resolve(entries: list[Entry], error: BaseException | None = None) -> None:
        """Let the engine go on with these items (release their in-flight slots)."""
        for _, _, fut in entries:
            try:
                fut.get_loop().call_soon_threadsafe(_resolve, fut, error)
            except RuntimeError:  # the engine loop is gone
                pass

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def run_claimed(
    batch_id: str, items: list[BatchItem], batcher: CrossProviderBatcher | None = None, *, owner: str
) -> ChunkReport:
    """Run items claimed by ``owner`` through the engine (helper thread) while this thread writes
    results in bulk, renews the claim lease and watches for a cancel."""
    report = ChunkReport(claimed=len(items))
    if not items:
        return report
    batch = Batch.objects.filter(id=batch_id).select_related("team").only("expires_at", "team__name").first()
    deadline = batch.expires_at.timestamp() if batch is not None and batch.expires_at else None
    team = batch.team.name if batch is not None else ""
    batcher = batcher or build_batcher(batch_id, owner=owner)
    cache = CacheStage(batcher.table, owner, dedup=False)  # cache hits stored here (docs/cache.md)
    items = cache.divert(items)
    engine = EngineThread(
        batcher,
        [work_item(i, deadline=deadline, team=team) for i in items],
        name=f"engine-{batch_id}",
        batch_id=str(batch_id),
    ).start()
    lease_s = float(settings.GATEWAY_CLAIM_LEASE_SECONDS)
    next_renew = time.monotonic() + lease_s / 3
    next_cancel_check = time.monotonic() + CANCEL_POLL_SECONDS
    write_error: BaseException | None = None
    released: list[int] = []
    while not engine.finished:
        entries = engine.collect()
        if entries:
            error = write_error
            if error is None:
                done = [(items[i], r) for i, r, _ in entries if r.status != "released"]
                released += [items[i].id for i, r, _ in entries if r.status == "released"]
                try:
                    applied = apply_results(batch_id, as_served(done), owner)
                    report.written += applied.written
                    report.dropped += applied.dropped
                    cache.after_store(done)
                except BaseException as exc:  # stop the engine; the claims expire and others retry
                    log.exception("batch %s: could not store %d results", batch_id, len(entries))
                    write_error = error = exc
                    engine.cancel.set()
            engine.resolve(entries, error)
        now = time.monotonic()
        if not engine.finished and now >= next_renew and write_error is None:
            renew_claims(batch_id, owner)
            next_renew = now + lease_s / 3
        if not engine.finished and now >= next_cancel_check:
            next_cancel_check = now + CANCEL_POLL_SECONDS
            if Batch.objects.filter(id=batch_id, status=BatchStatus.CANCELLED).exists():
                engine.cancel.set()
    if released:
        release_claims(owner, released)
    engine.thread.join()
    report.written += cache.hits
    if write_error is not None:
        raise write_error
    if engine.error is not None:
        raise engine.error
    return report


def execute_chunk(batch_id: str, seq_from: int | None = None, seq_to: int | None = None) -> ChunkReport:
    """Claim and run one range of a batch (or, without a range, whatever is claimable), then keep
    taking claimable items of the same batch, then finalize it if nothing is left.

    The dispatcher (fair, provider-aware) is how batches run; this is the direct path for one batch
    (tests, scripts, tasks queued by an older version)."""
    total = ChunkReport()
    batch = Batch.objects.filter(id=batch_id).only("id", "status", "completed_at").first()
    if batch is None or batch.completed_at is not None:
        total.finalized = batch is not None
        return total
    table = None
    owner = new_owner()
    chunk = int(settings.GATEWAY_CHUNK_SIZE)
    ranged = seq_from is not None or seq_to is not None
    while True:
        if batch.status == BatchStatus.CANCELLED:
            cancel_claimable(batch_id)
            break
        if ranged:
            items = claim_items(batch_id, seq_from=seq_from, seq_to=seq_to, owner=owner)
            ranged = False
        else:
            items = claim_items(batch_id, limit=chunk, owner=owner)
        if not items:
            break
        table = table or load_routing_table()
        report = run_claimed(batch_id, items, build_batcher(batch_id, table, owner=owner), owner=owner)
        total.claimed += report.claimed
        total.written += report.written
        total.dropped += report.dropped
        batch.refresh_from_db(fields=["status"])
        snapshot_progress(batch_id)
    total.finalized = finalize_batch_if_done(batch_id)
    return total

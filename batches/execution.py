"""Execution services: start a batch, claim and run a chunk, write results in bulk, finalize once, cancel.

The async engine (batches.engine) never touches the ORM. A chunk runs like this, in the calling thread
(a Celery worker, or the web process in single-process mode):

    1. claim items atomically: SELECT … FOR UPDATE SKIP LOCKED, then mark them running with a claim lease
       (claimed_by, claim_expires_at); expired claims of dead workers are claimable again;
    2. load the provider config into plain dataclasses (RoutingTable);
    3. run the engine in a helper thread with its own event loop; this thread receives each finished
       item, writes results in bulk (bulk_update, a few hundred rows per statement, only rows still
       claimed by this worker → every item gets exactly one terminal result), renews the claim lease,
       and notices a cancel;
    4. after the chunk, steal any claimable items left in the batch (pending ones of chunks not started
       yet, expired claims), then finalize the batch if nothing is left — exactly once, under a row lock.

A reaper thread in every Celery worker re-enqueues batches whose items sit under expired claims
(a worker was killed), see ``reap_expired_claims``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import DataError, connection, transaction
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from batches.engine import CrossProviderBatcher, EngineOptions, ItemResult, RetryPolicy, WorkItem
from batches.engine.stats import StatsBuilder
from observability import events
from providers.models import Provider, RoutingRule
from providers.pricing import add_stats_costs, prices_by_provider
from providers.routing import RoutingTable, routing_table_from_models

from .models import Batch, BatchItem, BatchStatus, ItemStatus, TeamUsageDaily

log = logging.getLogger(__name__)
batch_log = logging.getLogger("batches.batchlog")

WRITE_BATCH_ROWS = 500
CANCEL_POLL_SECONDS = 0.5
WRITE_GATHER_SECONDS = 0.01  # group commit: gather results for up to 10 ms per write
PROGRESS_SNAPSHOT_SECONDS = 5.0
PROGRESS_SNAPSHOT_MAX_ITEMS = 20_000
RESULT_FIELDS = [
    "status",
    "provider",
    "attempts",
    "latency_ms",
    "response",
    "error_type",
    "error_status_code",
    "error_message",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "retry_extra_tokens",
    "attempt_log",
    "claimed_by",
    "claim_expires_at",
    "finished_at",
]
ENGINE_TO_ITEM_STATUS = {
    "succeeded": ItemStatus.SUCCEEDED,
    "failed": ItemStatus.FAILED,
    "cancelled": ItemStatus.CANCELLED,
}
OPEN_ITEM_STATUSES = (ItemStatus.PENDING, ItemStatus.RUNNING)

_WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def worker_id() -> str:
    """Identity written to claimed_by (host:pid:random, per process)."""
    return _WORKER_ID


def claim_lease() -> timedelta:
    return timedelta(seconds=float(settings.GATEWAY_CLAIM_LEASE_SECONDS))


@dataclass
class ChunkReport:
    claimed: int = 0
    written: int = 0
    dropped: int = 0  # results for items this worker no longer owned (its claim had expired)
    finalized: bool = False


# ---- start ---------------------------------------------------------------------------------------------


def start_batch(batch_id: str) -> list[tuple[int, int]]:
    """Mark a queued batch running and split it into seq ranges of GATEWAY_CHUNK_SIZE items.

    Returns the ranges [(seq_from, seq_to), …] to hand to execute_chunk; [] if there is nothing to run.
    In single-process mode (eager Celery) the whole batch is one range: the engine already interleaves
    every item, and sequential chunks would only add tail waits.
    """
    now = timezone.now()
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        if batch.completed_at is not None or batch.status in (BatchStatus.COMPLETED, BatchStatus.FAILED):
            return []
        if batch.status == BatchStatus.QUEUED:
            batch.status, batch.started_at = BatchStatus.RUNNING, now
            batch.save(update_fields=["status", "started_at"])
            transaction.on_commit(lambda: events.batch_started(batch))
    bounds = BatchItem.objects.filter(batch_id=batch_id).aggregate(lo=Min("seq"), hi=Max("seq"))
    if bounds["lo"] is None:
        finalize_batch_if_done(batch_id)
        return []
    lo, hi = bounds["lo"], bounds["hi"] + 1
    size = hi - lo if settings.CELERY_TASK_ALWAYS_EAGER else int(settings.GATEWAY_CHUNK_SIZE)
    return [(start, min(start + size, hi)) for start in range(lo, hi, size)]


# ---- claim ---------------------------------------------------------------------------------------------


def claim_items(
    batch_id: str,
    *,
    seq_from: int | None = None,
    seq_to: int | None = None,
    limit: int | None = None,
    owner: str | None = None,
) -> list[BatchItem]:
    """Atomically take pending items (and items under expired claims) of a batch for this worker."""
    owner = owner or worker_id()
    now = timezone.now()
    claimable = Q(status=ItemStatus.PENDING) | Q(status=ItemStatus.RUNNING, claim_expires_at__lt=now)
    with transaction.atomic():
        qs = BatchItem.objects.filter(claimable, batch_id=batch_id)
        if seq_from is not None:
            qs = qs.filter(seq__gte=seq_from)
        if seq_to is not None:
            qs = qs.filter(seq__lt=seq_to)
        qs = (
            qs.order_by("seq")
            .select_for_update(skip_locked=True, of=("self",))
            .only("id", "seq", "custom_id", "route", "requested_provider", "payload", "started_at")
        )
        items = list(qs[:limit] if limit else qs)
        if items:
            BatchItem.objects.filter(id__in=[i.id for i in items]).update(
                status=ItemStatus.RUNNING, claimed_by=owner, claim_expires_at=now + claim_lease()
            )
            BatchItem.objects.filter(id__in=[i.id for i in items], started_at__isnull=True).update(
                started_at=now
            )
    return items


def renew_claims(batch_id: str, owner: str | None = None) -> int:
    return BatchItem.objects.filter(
        batch_id=batch_id, claimed_by=owner or worker_id(), status=ItemStatus.RUNNING
    ).update(claim_expires_at=timezone.now() + claim_lease())


# ---- config --------------------------------------------------------------------------------------------


def load_routing_table() -> RoutingTable:
    """Every provider and routing rule as plain dataclasses (disabled ones are skipped by routing)."""
    return routing_table_from_models(Provider.objects.all(), RoutingRule.objects.select_related("provider"))


def engine_options() -> EngineOptions:
    return EngineOptions(
        default_max_tokens=int(settings.GATEWAY_DEFAULT_MAX_TOKENS),
        retry=RetryPolicy(
            base_seconds=float(settings.GATEWAY_RETRY_BASE_SECONDS),
            cap_seconds=float(settings.GATEWAY_RETRY_CAP_SECONDS),
            max_rate_limit_wait_seconds=float(settings.GATEWAY_MAX_RATE_LIMIT_WAIT_SECONDS),
        ),
        max_breaker_wait_seconds=float(settings.GATEWAY_MAX_BREAKER_WAIT_SECONDS),
        max_answer_bytes=int(settings.GATEWAY_MAX_ANSWER_BYTES),
    )


def build_batcher(batch_id: str, table: RoutingTable | None = None) -> CrossProviderBatcher:
    """The engine wired to the shared quota store, breaker and live limits (chosen by settings)."""
    from observability.engine import engine_observer
    from providers.breaker import get_breaker
    from providers.quota import LimitsSource, get_quota_store

    table = table or load_routing_table()
    return CrossProviderBatcher(
        table,
        store=get_quota_store(),
        breaker=get_breaker(),
        limits_source=LimitsSource.shared(),
        options=engine_options(),
        salt=str(batch_id),
        observer=engine_observer(batch_id, table),
    )


def work_item(item: BatchItem, team: str = "") -> WorkItem:
    payload = item.payload or {}
    return WorkItem(
        custom_id=item.custom_id,
        messages=payload.get("messages") or [],
        params=dict(payload.get("params") or {}),
        route=item.route,
        provider=item.requested_provider,
        key=item.custom_id,
        team=team,
    )


# ---- write results -------------------------------------------------------------------------------------


def write_results(
    batch_id: str, entries: list[tuple[BatchItem, ItemResult]], owner: str | None = None
) -> int:
    """Store finished items in bulk. Only rows still running under this worker's claim are written, so
    an item whose claim expired and was taken by another worker keeps exactly one terminal result.
    Returns how many rows were written.

    PostgreSQL: one ``UPDATE … FROM jsonb_to_recordset(%s) … WHERE claimed_by = me RETURNING`` per
    WRITE_BATCH_ROWS rows, all values in one jsonb parameter (cheap to build; Django's bulk_update
    CASE expressions cost ~10 ms of Python per few rows). Other databases (single-process SQLite): ``bulk_update`` of the owned rows.
    """
    owner = owner or worker_id()
    if not entries:
        return 0
    now = timezone.now()
    if connection.vendor == "postgresql":
        # one statement per WRITE_BATCH_ROWS rows (run_claimed never passes more): rows and batch
        # counters in a single round trip, atomic on its own; several statements share one transaction
        slices = [entries[i : i + WRITE_BATCH_ROWS] for i in range(0, len(entries), WRITE_BATCH_ROWS)]
        with transaction.atomic() if len(slices) > 1 else contextlib.nullcontext():
            written = sum(_update_values(part, owner, now, batch_id) for part in slices)
    else:
        counts: dict[str, int] = defaultdict(int)
        with transaction.atomic():
            written = _bulk_update_owned(entries, owner, now, counts)
            if written:
                from django.db.models import F

                Batch.objects.filter(id=batch_id).update(
                    completed_count=F("completed_count") + counts[ItemStatus.SUCCEEDED],
                    failed_count=F("failed_count") + counts[ItemStatus.FAILED],
                    cancelled_count=F("cancelled_count") + counts[ItemStatus.CANCELLED],
                )
    if written < len(entries):
        log.warning(
            "batch %s: dropped %d results of items no longer claimed by %s",
            batch_id,
            len(entries) - written,
            owner,
        )
    return written


_VALUE_COLUMNS = (
    ("id", "bigint"), ("status", "varchar"), ("provider", "varchar"), ("attempts", "integer"),
    ("latency_ms", "integer"), ("response", "jsonb"), ("error_type", "varchar"),
    ("error_status_code", "smallint"), ("error_message", "text"), ("prompt_tokens", "bigint"),
    ("completion_tokens", "bigint"), ("total_tokens", "bigint"), ("retry_extra_tokens", "bigint"),
    ("attempt_log", "jsonb"),
)  # fmt: skip
_UPDATE_SQL = (
    "WITH u AS (UPDATE {items} AS t SET "
    + ", ".join(f"{name} = v.{name}" for name, _ in _VALUE_COLUMNS[1:])
    + ", claimed_by = '', claim_expires_at = NULL, finished_at = %s "
    "FROM jsonb_to_recordset(%s::jsonb) AS v("
    + ", ".join(f"{name} {kind}" for name, kind in _VALUE_COLUMNS)
    + ") WHERE t.id = v.id AND t.status = %s AND t.claimed_by = %s RETURNING t.status), "
    "n AS (SELECT count(*) FILTER (WHERE status = %s) AS ok, count(*) FILTER (WHERE status = %s) AS bad, "
    "count(*) FILTER (WHERE status = %s) AS cancelled, count(*) AS total FROM u), "
    "b AS (UPDATE {batches} SET completed_count = completed_count + n.ok, "
    "failed_count = failed_count + n.bad, cancelled_count = cancelled_count + n.cancelled "
    "FROM n WHERE id = %s AND n.total > 0) "
    "SELECT count(*) FROM u"
)


def _update_values(entries: list[tuple[BatchItem, ItemResult]], owner: str, now, batch_id: str) -> int:
    """One statement for up to WRITE_BATCH_ROWS results: the owned rows and the batch's counters
    (a data-modifying CTE, so one round trip and atomic without a transaction block). Returns how
    many rows were written.

    All rows travel as ONE jsonb parameter (``jsonb_to_recordset``): one C-speed json.dumps instead of
    14 parameters per row quoted one by one by the driver (JSON null → SQL NULL, as before).

    A value PostgreSQL refuses (DataError: NUL or a lone surrogate in text/jsonb, a number out of
    range; ValueError: NaN) must not fail the neighbours' write nor make the items run again: the
    rows are then written one by one, and a row that still cannot be written is stored as that
    item's ``invalid_response`` result (``_unstorable``)."""
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            return _update_values_once(entries, owner, now, batch_id)
    except (DataError, ValueError) as exc:
        if len(entries) == 1:
            item, result = entries[0]
            log.warning("batch %s: result of item %s cannot be stored (%s)", batch_id, item.pk, exc)
            with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
                return _update_values_once([(item, _unstorable(result, exc))], owner, now, batch_id)
        return sum(_update_values([entry], owner, now, batch_id) for entry in entries)


def _unstorable(result: ItemResult, exc: BaseException) -> ItemResult:
    """The stored stand-in for a result PostgreSQL refused: invalid_response, nothing of the answer."""
    return ItemResult(
        result.custom_id,
        "failed",
        provider=result.provider,
        attempts=result.attempts,
        latency_ms=result.latency_ms,
        error_type="invalid_response",
        error_status_code=result.error_status_code,
        error_message=f"the provider's answer could not be stored ({type(exc).__name__})",
    )


def _update_values_once(entries: list[tuple[BatchItem, ItemResult]], owner: str, now, batch_id: str) -> int:
    rows = [
        {
            "id": item.id, "status": ENGINE_TO_ITEM_STATUS[r.status], "provider": r.provider,
            "attempts": r.attempts, "latency_ms": r.latency_ms, "response": r.response,
            "error_type": r.error_type, "error_status_code": r.error_status_code,
            "error_message": r.error_message, "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens, "total_tokens": r.total_tokens,
            "retry_extra_tokens": r.retry_extra_tokens, "attempt_log": r.attempt_log,
        }
        for item, r in entries
    ]  # fmt: skip
    sql = _UPDATE_SQL.format(items=BatchItem._meta.db_table, batches=Batch._meta.db_table)
    params = [now, json.dumps(rows, allow_nan=False), ItemStatus.RUNNING, owner]
    params += [ItemStatus.SUCCEEDED, ItemStatus.FAILED, ItemStatus.CANCELLED, str(batch_id)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


def _bulk_update_owned(entries, owner: str, now, counts: dict) -> int:
    owned = set(
        BatchItem.objects.select_for_update()
        .filter(id__in=[item.id for item, _ in entries], status=ItemStatus.RUNNING, claimed_by=owner)
        .values_list("id", flat=True)
    )
    rows = []
    for item, result in entries:
        if item.id not in owned:
            continue
        status = ENGINE_TO_ITEM_STATUS[result.status]
        counts[status] += 1
        rows.append(
            BatchItem(
                id=item.id,
                status=status,
                provider=result.provider,
                attempts=result.attempts,
                latency_ms=result.latency_ms,
                response=result.response,
                error_type=result.error_type,
                error_status_code=result.error_status_code,
                error_message=result.error_message,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                total_tokens=result.total_tokens,
                retry_extra_tokens=result.retry_extra_tokens,
                attempt_log=result.attempt_log,
                claimed_by="",
                claim_expires_at=None,
                finished_at=now,
            )
        )
    if rows:
        BatchItem.objects.bulk_update(rows, RESULT_FIELDS, batch_size=WRITE_BATCH_ROWS)
    return len(rows)


# ---- run one set of claimed items ----------------------------------------------------------------------


def _resolve(fut: asyncio.Future, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


def run_claimed(
    batch_id: str, items: list[BatchItem], batcher: CrossProviderBatcher | None = None
) -> ChunkReport:
    """Run claimed items through the engine (helper thread) while this thread writes results in bulk,
    renews the claim lease and watches for a cancel."""
    report = ChunkReport(claimed=len(items))
    if not items:
        return report
    owner = worker_id()
    batcher = batcher or build_batcher(batch_id)
    team = Batch.objects.filter(id=batch_id).values_list("team__name", flat=True).first() or ""
    work = [work_item(i, team) for i in items]
    inbox: queue.Queue = queue.Queue()
    cancel = threading.Event()
    outcome: dict = {}

    async def on_result(index: int, result: ItemResult) -> None:
        fut = asyncio.get_running_loop().create_future()
        inbox.put((index, result, fut))
        await fut  # the in-flight slot stays held until the result is stored

    async def main() -> None:
        try:
            await batcher.abatch(
                work, on_result=on_result, should_cancel=cancel.is_set, batch_id=str(batch_id)
            )
        finally:
            for closeable in (batcher.store, batcher.breaker):
                try:
                    await closeable.aclose()
                except Exception:  # noqa: BLE001
                    log.warning("closing %r failed", closeable, exc_info=True)

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # re-raised in the calling thread
            outcome["error"] = exc
        finally:
            inbox.put(None)

    thread = threading.Thread(target=target, name=f"engine-{batch_id}", daemon=True)
    thread.start()
    lease_s = float(settings.GATEWAY_CLAIM_LEASE_SECONDS)
    next_renew = time.monotonic() + lease_s / 3
    next_cancel_check = time.monotonic() + CANCEL_POLL_SECONDS
    finished = False
    write_error: BaseException | None = None
    while not finished:
        entries = []
        try:
            entries.append(inbox.get(timeout=0.2))
            # group commit: gather what finishes within a few ms so one statement stores many rows
            gather_until = time.monotonic() + WRITE_GATHER_SECONDS
            while entries[-1] is not None and len(entries) < WRITE_BATCH_ROWS:
                wait = gather_until - time.monotonic()
                entries.append(inbox.get(timeout=wait) if wait > 0 else inbox.get_nowait())
        except queue.Empty:
            pass
        if None in entries:
            finished = True
            entries = [e for e in entries if e is not None]
        if entries:
            error = write_error
            if error is None:
                try:
                    written = write_results(batch_id, [(items[i], r) for i, r, _ in entries], owner)
                    report.written += written
                    report.dropped += len(entries) - written
                except BaseException as exc:  # stop the engine; the claims expire and others retry
                    log.exception("batch %s: could not store %d results", batch_id, len(entries))
                    write_error = error = exc
                    cancel.set()
            for _, _, fut in entries:
                try:
                    fut.get_loop().call_soon_threadsafe(_resolve, fut, error)
                except RuntimeError:  # the engine loop is gone
                    pass
        now = time.monotonic()
        if not finished and now >= next_renew and write_error is None:
            renew_claims(batch_id, owner)
            next_renew = now + lease_s / 3
        if not finished and now >= next_cancel_check:
            next_cancel_check = now + CANCEL_POLL_SECONDS
            if Batch.objects.filter(id=batch_id, status=BatchStatus.CANCELLED).exists():
                cancel.set()
    thread.join()
    if write_error is not None:
        raise write_error
    if "error" in outcome:
        raise outcome["error"]
    return report


# ---- chunk ---------------------------------------------------------------------------------------------


def execute_chunk(batch_id: str, seq_from: int | None = None, seq_to: int | None = None) -> ChunkReport:
    """Claim and run one range of a batch (or, without a range, whatever is claimable), then keep
    stealing claimable items of the same batch, then finalize it if nothing is left."""
    total = ChunkReport()
    batch = Batch.objects.filter(id=batch_id).only("id", "status", "completed_at").first()
    if batch is None or batch.completed_at is not None:
        total.finalized = batch is not None
        return total
    table = None
    chunk = int(settings.GATEWAY_CHUNK_SIZE)
    ranged = seq_from is not None or seq_to is not None
    while True:
        if batch.status == BatchStatus.CANCELLED:
            cancel_claimable(batch_id)
            break
        if ranged:
            items = claim_items(batch_id, seq_from=seq_from, seq_to=seq_to)
            ranged = False
        else:
            items = claim_items(batch_id, limit=chunk)
        if not items:
            break
        table = table or load_routing_table()
        report = run_claimed(batch_id, items, build_batcher(batch_id, table))
        total.claimed += report.claimed
        total.written += report.written
        total.dropped += report.dropped
        batch.refresh_from_db(fields=["status"])
        snapshot_progress(batch_id)
    total.finalized = finalize_batch_if_done(batch_id)
    return total


_last_snapshot: dict[str, float] = {}


def snapshot_progress(batch_id: str, *, force: bool = False) -> bool:
    """Write a progress snapshot of the stats (same shape as the final one) while the batch runs.
    Throttled per process to one every PROGRESS_SNAPSHOT_SECONDS, and only for batches up to
    PROGRESS_SNAPSHOT_MAX_ITEMS items (the snapshot reads every finished item). Never overwrites the
    final stats: the update only matches a batch that is not finalized yet."""
    now = time.monotonic()
    if not force and now - _last_snapshot.get(batch_id, -1e9) < PROGRESS_SNAPSHOT_SECONDS:
        return False
    _last_snapshot[batch_id] = now
    if len(_last_snapshot) > 1000:
        _last_snapshot.clear()
    batch = Batch.objects.filter(id=batch_id, completed_at__isnull=True).first()
    if batch is None or batch.total_count > PROGRESS_SNAPSHOT_MAX_ITEMS:
        return False
    began = batch.started_at or batch.created_at
    stats, _ = batch_stats(batch, max(0, int((timezone.now() - began).total_seconds() * 1000)))
    return bool(Batch.objects.filter(id=batch_id, completed_at__isnull=True).update(stats=stats))


def cancel_claimable(batch_id: str) -> int:
    """Cancel pending items and items under expired claims (nobody is sending them)."""
    now = timezone.now()
    claimable = Q(status=ItemStatus.PENDING) | Q(status=ItemStatus.RUNNING, claim_expires_at__lt=now)
    with transaction.atomic():
        ids = list(
            BatchItem.objects.filter(claimable, batch_id=batch_id)
            .select_for_update(skip_locked=True)
            .values_list("id", flat=True)
        )
        n = BatchItem.objects.filter(id__in=ids).update(
            status=ItemStatus.CANCELLED,
            finished_at=now,
            claimed_by="",
            claim_expires_at=None,
            error_message="batch cancelled before the item was sent",
        )
        if n:
            from django.db.models import F

            Batch.objects.filter(id=batch_id).update(cancelled_count=F("cancelled_count") + n)
    return n


# ---- cancel --------------------------------------------------------------------------------------------


def cancel_batch(batch_id: str) -> Batch:
    """Cancel a batch: items not yet sent are cancelled, in-flight ones finish (a running worker notices
    within about a second). The batch is finalized as soon as nothing is left running."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        if batch.completed_at is not None or batch.status in (BatchStatus.COMPLETED, BatchStatus.FAILED):
            return batch
        batch.status = BatchStatus.CANCELLED
        batch.save(update_fields=["status"])
    cancel_claimable(batch_id)
    finalize_batch_if_done(batch_id)
    return Batch.objects.get(id=batch_id)


# ---- finalize ------------------------------------------------------------------------------------------


def batch_stats(batch: Batch, elapsed_ms: int) -> tuple[dict, StatsBuilder]:
    builder = StatsBuilder()
    rows = (
        BatchItem.objects.filter(batch_id=batch.id)
        .values_list("status", "provider", "attempt_log", "prompt_tokens", "completion_tokens")
        .iterator(chunk_size=2000)
    )
    total = 0
    for status, provider, attempt_log, prompt, completion in rows:
        total += 1
        builder.add_item(
            status, attempt_log, provider=provider, prompt_tokens=prompt, completion_tokens=completion
        )
    stats = add_stats_costs(
        builder.build(str(batch.id), batch.total_count or total, elapsed_ms), prices_by_provider()
    )
    return stats, builder


def _upsert_usage(batch: Batch, stats: dict, day) -> None:
    """TeamUsageDaily += this batch's numbers, per provider, race-free (INSERT … ON CONFLICT)."""
    table = TeamUsageDaily._meta.db_table
    rows = []
    for provider, p in stats["providers"].items():
        rows.append(
            (
                batch.team_id,
                provider,
                day,
                p["request_count"],
                p["items_succeeded"],
                p["items_failed"],
                p["prompt_tokens"],
                p["completion_tokens"],
                p["retry_extra_tokens"],
            )
        )
    if not rows:
        return
    sql = (
        f"INSERT INTO {table} (team_id, provider, day, requests, items_succeeded, items_failed, "
        "prompt_tokens, completion_tokens, wasted_tokens) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (team_id, provider, day) DO UPDATE SET "
        f"requests = {table}.requests + excluded.requests, "
        f"items_succeeded = {table}.items_succeeded + excluded.items_succeeded, "
        f"items_failed = {table}.items_failed + excluded.items_failed, "
        f"prompt_tokens = {table}.prompt_tokens + excluded.prompt_tokens, "
        f"completion_tokens = {table}.completion_tokens + excluded.completion_tokens, "
        f"wasted_tokens = {table}.wasted_tokens + excluded.wasted_tokens"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def finalize_batch_if_done(batch_id: str) -> bool:
    """If every item of the batch is terminal, finalize it exactly once: status, counts, stats,
    completed_at, TeamUsageDaily, one JSON log line. Returns True if the batch is (now or already) final."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        if batch.completed_at is not None:
            return True
        if BatchItem.objects.filter(batch_id=batch_id, status__in=OPEN_ITEM_STATUSES).exists():
            return False
        counts = dict(
            BatchItem.objects.filter(batch_id=batch_id)
            .values_list("status")
            .annotate(n=Count("id"))
            .order_by()
        )
        now = timezone.now()
        began = batch.started_at or batch.created_at
        elapsed_ms = max(0, int((now - began).total_seconds() * 1000))
        stats, _ = batch_stats(batch, elapsed_ms)
        batch.completed_count = counts.get(ItemStatus.SUCCEEDED, 0)
        batch.failed_count = counts.get(ItemStatus.FAILED, 0)
        batch.cancelled_count = counts.get(ItemStatus.CANCELLED, 0)
        if batch.status == BatchStatus.CANCELLED:
            pass
        elif batch.completed_count == 0 and batch.failed_count > 0:
            batch.status = BatchStatus.FAILED
        else:
            batch.status = BatchStatus.COMPLETED
        batch.started_at = began
        batch.completed_at = now
        batch.stats = stats
        batch.save(
            update_fields=[
                "status",
                "completed_count",
                "failed_count",
                "cancelled_count",
                "started_at",
                "completed_at",
                "stats",
            ]
        )
        _upsert_usage(batch, stats, now.date())
        line = {"event": "batch_finished", "status": batch.status, "team_id": batch.team_id, **stats}
        transaction.on_commit(lambda: events.batch_finished(batch, line))
    return True


# ---- reaper (Celery workers) ---------------------------------------------------------------------------


def batches_with_expired_claims(limit: int = 100) -> list[str]:
    now = timezone.now()
    ids = (
        BatchItem.objects.filter(status=ItemStatus.RUNNING, claim_expires_at__lt=now)
        .order_by()
        .values_list("batch_id", flat=True)
        .distinct()[:limit]
    )
    return list(dict.fromkeys(str(i) for i in ids))


def reap_expired_claims(enqueue) -> list[str]:
    """Find batches whose items sit under expired claims (their worker died) and hand each to
    ``enqueue(batch_id)`` at most once per lease period (deduplicated through Redis when shared)."""
    found = batches_with_expired_claims()
    if not found:
        return []
    sent = []
    lease = max(1, int(float(settings.GATEWAY_CLAIM_LEASE_SECONDS)))
    client = None
    if settings.GATEWAY_QUOTA_BACKEND == "redis":
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        for batch_id in found:
            if client is not None and not client.set(
                f"{settings.GATEWAY_REDIS_PREFIX}reap:{batch_id}", worker_id(), nx=True, ex=lease
            ):
                continue
            enqueue(batch_id)
            sent.append(batch_id)
    finally:
        if client is not None:
            client.close()
    if sent:
        log.info("reaper: re-enqueued %d batch(es) with expired claims: %s", len(sent), ", ".join(sent))
    return sent


class Reaper(threading.Thread):
    """Background thread of a Celery worker: every lease/3 seconds, re-enqueue batches with expired
    claims. Stops with the process (daemon)."""

    def __init__(self, enqueue):
        super().__init__(name="gateway-reaper", daemon=True)
        self.enqueue = enqueue
        self.stopped = threading.Event()

    def run(self) -> None:
        interval = max(1.0, float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3)
        while not self.stopped.wait(interval):
            try:
                reap_expired_claims(self.enqueue)
            except Exception:  # noqa: BLE001 - a reaper hiccup must never kill the worker
                log.exception("reaper pass failed")
            finally:
                connection.close()

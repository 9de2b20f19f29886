"""Finalize (exactly once per batch), progress snapshots, cancel.

Batch status at the end, by precedence: ``cancelled`` (a cancel was asked) > ``expired`` (any item
expired) > ``failed`` (every finished item failed) > ``completed``.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from batches import signals
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus, TeamUsageDaily
from gateway_engine.endpoints import CHAT
from gateway_engine.redis_errors import REDIS_ERRORS

from .claims import cancel_claimable
from .common import OPEN_ITEM_STATUSES
from .journal import enabled as shared_mode
from .journal import shared_client
from .stats import PROVIDER_BATCH, batch_stats

batch_log = logging.getLogger("batches.batchlog")
log = logging.getLogger("batches.execution")

PROGRESS_SNAPSHOT_SECONDS = 5.0
PROGRESS_SNAPSHOT_MAX_ITEMS = 20_000
FINISHED_STATUSES = (BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.EXPIRED)


# TeamUsageDaily's provider of the items that failed before reaching any provider (no request, no tokens)
NO_PROVIDER = ""


def _upsert_usage(batch: Batch, stats: dict, day) -> None:
    """TeamUsageDaily += this batch's numbers, per provider and endpoint (upsert_team_usage, from
    ``stats["endpoints"]``); the items that failed before reaching a provider count in
    ``items_failed`` of the row with provider ``NO_PROVIDER``."""
    rows = []
    for endpoint, part in (stats.get("endpoints") or {CHAT: stats}).items():
        for provider, p in part["providers"].items():
            batched = p.get(PROVIDER_BATCH) or {}
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
                    p.get("cached_tokens", 0),
                    p.get("cache_write_tokens", 0),
                    int(batched.get("prompt_tokens", 0)),
                    int(batched.get("completion_tokens", 0)),
                    endpoint,
                )
            )
        unrouted = int(part.get("failed_count", 0)) - sum(
            p["items_failed"] for p in part["providers"].values()
        )
        if (
            unrouted > 0
        ):  # failed before reaching any provider (no_provider, budget_exceeded, quota_impossible)
            rows.append((batch.team_id, NO_PROVIDER, day, 0, 0, unrouted, 0, 0, 0, 0, 0, 0, 0, endpoint))
    upsert_team_usage(rows)


USAGE_ROW_NUMBERS = 13  # team_id, provider, day and the ten numbers; the endpoint comes last


def upsert_team_usage(rows: list[tuple]) -> None:
    """TeamUsageDaily += each row (team_id, provider, day, requests, items_succeeded, items_failed,
    prompt_tokens, completion_tokens, wasted_tokens, cached_tokens, cache_write_tokens[,
    provider_batch_prompt_tokens, provider_batch_completion_tokens[, endpoint]]), race-free (INSERT …
    ON CONFLICT): the batch finalizer's and the interactive lane's one writer (a row without the
    provider-batch parts is all real time; a row without its endpoint is ``chat``'s)."""
    table = TeamUsageDaily._meta.db_table
    if not rows:
        return
    rows = [_full_row(row) for row in rows]
    sql = (
        f"INSERT INTO {table} (team_id, provider, day, requests, items_succeeded, items_failed, "
        "prompt_tokens, completion_tokens, wasted_tokens, cached_tokens, cache_write_tokens, "
        "provider_batch_prompt_tokens, provider_batch_completion_tokens, endpoint) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (team_id, provider, endpoint, day) DO UPDATE SET "
        f"requests = {table}.requests + excluded.requests, "
        f"items_succeeded = {table}.items_succeeded + excluded.items_succeeded, "
        f"items_failed = {table}.items_failed + excluded.items_failed, "
        f"prompt_tokens = {table}.prompt_tokens + excluded.prompt_tokens, "
        f"completion_tokens = {table}.completion_tokens + excluded.completion_tokens, "
        f"wasted_tokens = {table}.wasted_tokens + excluded.wasted_tokens, "
        f"cached_tokens = {table}.cached_tokens + excluded.cached_tokens, "
        f"cache_write_tokens = {table}.cache_write_tokens + excluded.cache_write_tokens, "
        f"provider_batch_prompt_tokens = {table}.provider_batch_prompt_tokens "
        "+ excluded.provider_batch_prompt_tokens, "
        f"provider_batch_completion_tokens = {table}.provider_batch_completion_tokens "
        "+ excluded.provider_batch_completion_tokens"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _full_row(row: tuple) -> tuple:
    """A usage row with every number (missing ones 0) and its endpoint (missing: chat)."""
    if len(row) > USAGE_ROW_NUMBERS:
        *numbers, endpoint = row
    else:
        numbers, endpoint = list(row), CHAT
    return (*numbers, *(0,) * (USAGE_ROW_NUMBERS - len(numbers)), endpoint)


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
        batch.expired_count = counts.get(ItemStatus.EXPIRED, 0)
        # precedence: cancelled > expired > completed/failed
        if batch.status == BatchStatus.CANCELLED:
            pass
        elif batch.expired_count > 0:
            batch.status = BatchStatus.EXPIRED
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
                "expired_count",
                "started_at",
                "completed_at",
                "stats",
            ]
        )
        _upsert_usage(batch, stats, now.date())
        line = {"event": "batch_finished", "status": batch.status, "team_id": batch.team_id, **stats}
        transaction.on_commit(lambda: signals.batch_finished.send(sender=Batch, batch=batch, line=line))
    return True


def count_late_usage(batch_id: str, item_ids) -> int:
    """TeamUsageDaily += the usage of items written after their batch was finalized (their
    ``finished_at`` is later than the batch's ``completed_at``, so the finalizer did not count them):
    e.g. a provider batch's result applied late. Returns how many items were counted."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().filter(id=batch_id, completed_at__isnull=False).first()
        if batch is None:
            return 0
        late = list(
            BatchItem.objects.filter(
                batch_id=batch_id, id__in=list(item_ids), finished_at__gt=batch.completed_at
            ).values_list("id", flat=True)
        )
        if late:
            stats, _ = batch_stats(batch, 0, late)
            _upsert_usage(batch, stats, timezone.now().date())
    return len(late)


_last_snapshot: dict[str, float] = {}


def snapshot_progress(batch_id: str, *, force: bool = False) -> bool:
    """Write a progress snapshot of the stats (same shape as the final one) while the batch runs.
    Throttled to one every PROGRESS_SNAPSHOT_SECONDS per batch in the whole cluster (``_snapshot_turn``),
    and only for batches up to PROGRESS_SNAPSHOT_MAX_ITEMS items (the snapshot reads every finished item). Never overwrites the
    final stats: the update only matches a batch that is not finalized yet."""
    now = time.monotonic()
    if not force and now - _last_snapshot.get(batch_id, -1e9) < PROGRESS_SNAPSHOT_SECONDS:
        return False
    _last_snapshot[batch_id] = now
    if len(_last_snapshot) > 1000:
        _last_snapshot.clear()
    if not force and not _snapshot_turn(batch_id):
        return False
    batch = Batch.objects.filter(id=batch_id, completed_at__isnull=True).first()
    if batch is None or batch.total_count > PROGRESS_SNAPSHOT_MAX_ITEMS:
        return False
    began = batch.started_at or batch.created_at
    stats, _ = batch_stats(batch, max(0, int((timezone.now() - began).total_seconds() * 1000)))
    return bool(Batch.objects.filter(id=batch_id, completed_at__isnull=True).update(stats=stats))


def _snapshot_turn(batch_id: str) -> bool:
    """Whether this process takes the batch's next progress snapshot: one process of the cluster per
    PROGRESS_SNAPSHOT_SECONDS (``SET NX PX`` in the shared Redis). Each dispatcher process used to take
    its own, so N processes read every finished item of the batch N times per interval (a quarter of
    a dispatcher thread's CPU on the 10,000-item batch path, docs/benchmarks.md). Single-process mode,
    or Redis unreachable (logged): the per-process throttle alone."""
    if not shared_mode():
        return True
    key = f"{settings.GATEWAY_REDIS_PREFIX}snapshot:{batch_id}"
    try:
        return bool(shared_client().set(key, "1", nx=True, px=int(PROGRESS_SNAPSHOT_SECONDS * 1000)))
    except REDIS_ERRORS as exc:
        log.warning("progress snapshot of batch %s: no turn from Redis (%s); taken here", batch_id, exc)
        return True


def cancellable(batch: Batch) -> bool:
    """Whether cancelling still changes anything: cancel_batch leaves a finished batch as it is (a
    cancelled batch still finishing its in-flight items can be swept again)."""
    return batch.completed_at is None and batch.status not in FINISHED_STATUSES


def cancel_batch(batch_id: str) -> Batch:
    """Cancel a batch: items not yet sent are cancelled, in-flight ones finish (a running worker notices
    within about a second). The batch is finalized as soon as nothing is left running."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        if not cancellable(batch):
            return batch
        batch.status = BatchStatus.CANCELLED
        batch.save(update_fields=["status"])
        signals.batch_action.send(
            sender=Batch, model="batch", object_id=str(batch.id), object_repr=f"{batch.team.name} {batch.id}",
            action="cancelled", changes=None,
        )  # fmt: skip
    cancel_claimable(batch_id)
    finalize_batch_if_done(batch_id)
    return Batch.objects.get(id=batch_id)

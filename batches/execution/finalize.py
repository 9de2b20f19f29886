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
from gateway_engine.redis_errors import REDIS_ERRORS
from gateway_engine.stats import StatsBuilder
from providers.pricing import add_stats_costs, prices_by_provider

from .claims import cancel_claimable
from .common import OPEN_ITEM_STATUSES
from .journal import enabled as shared_mode
from .journal import shared_client
from .steps import add_earlier_steps

batch_log = logging.getLogger("batches.batchlog")
log = logging.getLogger("batches.execution")

PROGRESS_SNAPSHOT_SECONDS = 5.0
PROGRESS_SNAPSHOT_MAX_ITEMS = 20_000
FINISHED_STATUSES = (BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.EXPIRED)


# An item answered by the response cache (or by an identical item's answer): ``cache_hits`` in the stats
CACHE_HIT = "cache"
# The prompt-cache counts of the stats (parts of prompt_tokens), per provider and in token_usage.
CACHE_KEYS = ("cached_tokens", "cache_write_tokens")


def batch_stats(batch: Batch, elapsed_ms: int, item_ids=None) -> tuple[dict, StatsBuilder]:
    """The stats of the batch's items (``item_ids``: of those only)."""
    builder = StatsBuilder()
    items = BatchItem.objects.filter(batch_id=batch.id)
    if item_ids is not None:
        items = items.filter(id__in=list(item_ids))
    rows = items.values_list(
        "status",
        "provider",
        "attempt_log",
        "prompt_tokens",
        "completion_tokens",
        *CACHE_KEYS,
        "served_by",
    ).iterator(chunk_size=2000)
    total = hits = 0
    cache: dict[str, list[int]] = {}  # provider → [cached, cache_write] of the answers it gave
    batched: dict[str, dict[str, int]] = {}  # provider → its provider-batch lines and their used tokens
    for status, provider, attempt_log, prompt, completion, cached, cache_write, served_by in rows:
        total += 1
        if served_by == CACHE_HIT:  # no call, nothing billed: counted as a hit, no provider's tokens
            hits += 1
            builder.add_item(status, attempt_log)
            continue
        count_provider_batch_lines(attempt_log, batched)
        builder.add_item(
            status, attempt_log, provider=provider, prompt_tokens=prompt, completion_tokens=completion
        )
        if cached or cache_write:
            counts = cache.setdefault(provider, [0, 0])
            counts[0] += cached or 0
            counts[1] += cache_write or 0
    add_earlier_steps(builder, batch, item_ids)  # pipelines: the steps before each item's current one
    stats = with_cache_tokens(builder.build(str(batch.id), batch.total_count or total, elapsed_ms), cache)
    stats["cache_hits"] = hits
    with_provider_batch(stats, batched, batch.batch_api_calls)
    return add_stats_costs(stats, prices_by_provider()), builder


PROVIDER_BATCH = "provider_batch"  # an attempt-log entry's ``served_by`` for a provider-batch line


def count_provider_batch_lines(attempt_log, batched: dict[str, dict[str, int]]) -> None:
    """Adds one item's provider-batch lines (attempt-log entries ``served_by: provider_batch``) and the
    tokens of the one whose answer was used, per provider."""
    for attempt in attempt_log or ():
        if attempt.get("served_by") != PROVIDER_BATCH:
            continue
        row = batched.setdefault(
            attempt.get("provider") or "?", {"request_count": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        row["request_count"] += 1
        if attempt.get("used"):
            row["prompt_tokens"] += int(attempt.get("prompt_tokens") or 0)
            row["completion_tokens"] += int(attempt.get("completion_tokens") or 0)


def with_provider_batch(stats: dict, batched: dict[str, dict[str, int]], api_calls: int) -> dict:
    """The provider-batch part of the stats (docs/provider_batches.md): per provider
    ``provider_batch`` {request_count (lines, also in the provider's request_count), prompt_tokens,
    completion_tokens} (priced by add_stats_costs), and ``batch_api_calls`` (the batch-API HTTP calls,
    which are no item's requests). Nothing is added for a batch that used no provider batch."""
    if not batched and not api_calls:
        return stats
    for name, row in batched.items():
        if name in stats.get("providers", {}):
            stats["providers"][name][PROVIDER_BATCH] = row
    stats["batch_api_calls"] = int(api_calls)
    return stats


def with_cache_tokens(stats: dict, cache: dict[str, list[int]]) -> dict:
    """Adds ``cached_tokens`` / ``cache_write_tokens`` (0 when none) beside the prompt tokens of every
    provider and of ``token_usage``, counted from the items' stored answers like their prompt tokens
    (the answer that became the item's result: its provider is the item's). In place; returns stats."""
    usage = stats.setdefault("token_usage", {})
    for key in CACHE_KEYS:
        usage[key] = 0
    for name, p in stats.get("providers", {}).items():
        cached, cache_write = cache.get(name, (0, 0))
        p["cached_tokens"], p["cache_write_tokens"] = cached, cache_write
    for cached, cache_write in cache.values():
        usage["cached_tokens"] += cached
        usage["cache_write_tokens"] += cache_write
    return stats


# TeamUsageDaily's provider of the items that failed before reaching any provider (no request, no tokens)
NO_PROVIDER = ""


def _upsert_usage(batch: Batch, stats: dict, day) -> None:
    """TeamUsageDaily += this batch's numbers, per provider (upsert_team_usage); the items that failed
    before reaching a provider count in ``items_failed`` of the row with provider ``NO_PROVIDER``."""
    rows = []
    for provider, p in stats["providers"].items():
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
            )
        )
    unrouted = int(stats.get("failed_count", 0)) - sum(p["items_failed"] for p in stats["providers"].values())
    if unrouted > 0:  # failed before reaching any provider (no_provider, budget_exceeded, quota_impossible)
        rows.append((batch.team_id, NO_PROVIDER, day, 0, 0, unrouted, 0, 0, 0, 0, 0, 0, 0))
    upsert_team_usage(rows)


def upsert_team_usage(rows: list[tuple]) -> None:
    """TeamUsageDaily += each row (team_id, provider, day, requests, items_succeeded, items_failed,
    prompt_tokens, completion_tokens, wasted_tokens, cached_tokens, cache_write_tokens[,
    provider_batch_prompt_tokens, provider_batch_completion_tokens]), race-free (INSERT … ON
    CONFLICT): the batch finalizer's and the interactive lane's one writer (a row without the
    provider-batch parts is all real time)."""
    table = TeamUsageDaily._meta.db_table
    if not rows:
        return
    rows = [tuple(row) + (0,) * (13 - len(row)) for row in rows]
    sql = (
        f"INSERT INTO {table} (team_id, provider, day, requests, items_succeeded, items_failed, "
        "prompt_tokens, completion_tokens, wasted_tokens, cached_tokens, cache_write_tokens, "
        "provider_batch_prompt_tokens, provider_batch_completion_tokens) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (team_id, provider, day) DO UPDATE SET "
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

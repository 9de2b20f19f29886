"""The batches page (history): the filtered list and each batch's summary from its Batch row alone
(the counters; no query over the items). The batch page's header shows the same summary."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import QuerySet
from django.utils import timezone

from batches.models import Batch
from teams.models import Team


def _day_start(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min), dt.UTC)


def batch_history(
    *,
    team: Team | None = None,
    status: str = "",
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
) -> QuerySet[Batch]:
    """Batches newest first; filters use the (team|status, -created_at) indexes."""
    qs = Batch.objects.select_related("team").defer("metadata", "api_key")
    if team is not None:
        qs = qs.filter(team=team)
    if status:
        qs = qs.filter(status=status)
    if date_from:
        qs = qs.filter(created_at__gte=_day_start(date_from))
    if date_to:
        qs = qs.filter(created_at__lt=_day_start(date_to + dt.timedelta(days=1)))
    return qs.order_by("-created_at")


@dataclass
class BatchSummary:
    """What the history table and the detail header show, from the Batch row alone."""

    batch: Batch
    total: int
    succeeded: int
    failed: int
    cancelled: int
    expired: int
    finished: int  # in a terminal state (succeeded, failed, cancelled, expired)
    progress_pct: float  # finished / total
    succeeded_pct: float  # the progress bar's segments, each a share of total
    failed_pct: float
    skipped_pct: float  # cancelled or expired: never sent
    success_rate: float | None  # succeeded / (succeeded + failed); None before anything finished
    duration: dt.timedelta | None
    providers: list[str]


def _share(part: int, total: int) -> float:
    return min(100.0, 100.0 * part / total) if total else 0.0


def summarize_batch(batch: Batch, now: dt.datetime | None = None) -> BatchSummary:
    total = batch.total_count
    succeeded, failed, cancelled = batch.completed_count, batch.failed_count, batch.cancelled_count
    expired = batch.expired_count
    finished = succeeded + failed + cancelled + expired
    decided = succeeded + failed
    stats = batch.stats or {}
    duration = None
    if stats.get("total_elapsed_ms") and batch.is_terminal:
        duration = dt.timedelta(milliseconds=int(stats["total_elapsed_ms"]))
    elif batch.started_at:
        end = batch.completed_at or now or timezone.now()
        duration = end - batch.started_at
    return BatchSummary(
        batch=batch,
        total=total,
        succeeded=succeeded,
        failed=failed,
        cancelled=cancelled,
        expired=expired,
        finished=finished,
        progress_pct=_share(finished, total),
        succeeded_pct=_share(succeeded, total),
        failed_pct=_share(failed, total),
        skipped_pct=_share(cancelled + expired, total),
        success_rate=(100.0 * succeeded / decided) if decided else None,
        duration=duration,
        providers=sorted((stats.get("providers") or {}).keys()),
    )

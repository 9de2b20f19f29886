"""Queue visibility (issue #10, docs/quota.md "Queue visibility"): pending items per provider queue,
team and lane for the providers page, and a batch's place in those queues for the batch page.

The rows are read here (one GROUP BY each); the fair-order arithmetic is the scheduler's
(batches.scheduling: LANE_RANK for the lanes, place.batch_places for the place and ETA).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.db.models import Case, Count, Q, Value, When

from batches.models import Batch, BatchItem, ItemStatus
from batches.scheduling.fair import LANE_RANK
from batches.scheduling.place import BatchPlace, QueuedBatch, batch_places
from providers.models import Provider
from teams.models import Team

UNASSIGNED_QUEUE = "(no provider queue yet)"


def _queue_key() -> Case:
    """An item's provider queue: queue_provider (set by the scheduler), else the provider it asked for
    by name, else "" (routed at send time)."""
    return Case(
        When(~Q(queue_provider=""), then="queue_provider"),
        When(~Q(requested_provider=""), then="requested_provider"),
        default=Value(""),
    )


@dataclass
class QueueRow:
    provider: str
    team: str
    priority: str
    pending: int


def queued_items_by_provider() -> list[QueueRow]:
    """Pending items per provider queue, team and lane (batch priority): one GROUP BY. Sorted by queue,
    then lane in service order (unknown lanes last), then team."""
    rows = (
        BatchItem.objects.filter(status=ItemStatus.PENDING)
        .annotate(queue=_queue_key())
        .values("queue", "batch__team__name", "batch__priority")
        .annotate(n=Count("id"))
        .order_by()
    )
    out = [
        QueueRow(r["queue"] or UNASSIGNED_QUEUE, r["batch__team__name"], r["batch__priority"], r["n"])
        for r in rows
    ]
    out.sort(key=lambda r: (r.provider, LANE_RANK.get(r.priority, len(LANE_RANK)), r.team))
    return out


def _queued_batches() -> list[QueuedBatch]:
    """Every batch's pending items per provider queue: one GROUP BY."""
    rows = (
        BatchItem.objects.filter(status=ItemStatus.PENDING)
        .annotate(queue=_queue_key())
        .values("queue", "batch_id", "batch__team_id", "batch__priority", "batch__created_at")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [
        QueuedBatch(
            r["queue"],
            r["batch_id"],
            r["batch__team_id"],
            r["batch__priority"],
            r["batch__created_at"],
            r["n"],
        )
        for r in rows
    ]


def batch_place(batch: Batch) -> list[BatchPlace]:
    """Where the batch stands in each provider queue it has pending items in, and when it should be
    done (batches.scheduling.place: the approximation of the fair order and the ETA)."""
    if batch.is_terminal:
        return []
    rows = _queued_batches()
    queues = [row.queue for row in rows if row.batch_id == batch.pk]
    if not queues:
        return []
    weights = dict(Team.objects.values_list("id", "weight"))
    rpms = dict(Provider.objects.filter(name__in=queues).values_list("name", "rpm"))
    return [
        dataclasses.replace(place, provider=place.provider or UNASSIGNED_QUEUE)
        for place in batch_places(batch.pk, rows, weights, rpms)
    ]

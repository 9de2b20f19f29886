"""What is queued for the dispatchers: per provider, the teams and batches with pending real-time items
(``queued_work``, re-read by every slice twice a second), and whether any work remains at all."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef

from batches.models import Batch, BatchItem, ItemStatus
from batches.scheduling import BatchCandidate

from .claims import ACTIVE_BATCH_STATUSES, REALTIME_PATH, queue_filter

__all__ = ["UNROUTED", "TeamWork", "queued_work", "work_remains"]

UNROUTED = ""  # queue of items with no routable provider at submission (and of rows stored before)


@dataclass
class TeamWork:
    weight: int
    batches: list[BatchCandidate] = field(default_factory=list)


def queued_work(providers: list[str]) -> dict[str, dict[str, TeamWork]]:
    """provider → team → its batches with pending items queued for that provider (one query: an
    EXISTS per provider on the (batch, queue_provider, status) index)."""
    names = list(dict.fromkeys([*providers, UNROUTED]))
    flags = {
        f"q{i}": Exists(
            BatchItem.objects.filter(
                queue_filter(name, names), REALTIME_PATH, batch=OuterRef("pk"), status=ItemStatus.PENDING
            )
        )
        for i, name in enumerate(names)
    }
    rows = (
        Batch.objects.filter(status__in=ACTIVE_BATCH_STATUSES, completed_at__isnull=True)
        .annotate(**flags)
        .values("id", "team_id", "team__name", "team__weight", "priority", "created_at", "expires_at", *flags)
    )
    work: dict[str, dict[str, TeamWork]] = {}
    for row in rows:
        cand = BatchCandidate(
            batch_id=str(row["id"]),
            team=str(row["team_id"]),
            priority=row["priority"],
            created_at=row["created_at"].timestamp(),
            expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
            team_name=row["team__name"],
        )
        for i, name in enumerate(names):
            if row[f"q{i}"]:
                team = work.setdefault(name, {}).setdefault(
                    cand.team, TeamWork(int(row["team__weight"] or 1))
                )
                team.batches.append(cand)
    return work


def work_remains() -> bool:
    """Any pending item in an unfinished batch (what dispatchers exist for)."""
    return BatchItem.objects.filter(
        REALTIME_PATH,
        status=ItemStatus.PENDING,
        batch__status__in=ACTIVE_BATCH_STATUSES,
        batch__completed_at__isnull=True,
    ).exists()

"""The provider-batch due work (batches.execution.due): items waiting to be grouped, and provider
batches whose ``due_at`` has come (a create, an adoption, a poll). Every reconciler pass asks
``next_due``; the thin task (provider_batches.tasks.work_due) runs ``work_slice``."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from batches.execution.due import DueQueue, claim_due
from batches.models import BatchStatus

from . import grouping, lifecycle, remote
from .models import OPEN_STATES, ChunkState, ProviderBatch

log = logging.getLogger("provider_batches")
NAME = "provider_batches"
ROWS_PER_SLICE = 20


def next_due() -> dt.datetime | None:
    """When the earliest provider-batch work is due: items to group or a cancelled gateway batch's
    provider batches (now), else the earliest open row's ``due_at``."""
    now = timezone.now()
    if grouping.next_group_due() is not None or _cancels_waiting().exists():
        return now
    return ProviderBatch.objects.filter(state__in=OPEN_STATES, due_at__isnull=False).aggregate(
        m=Min("due_at")
    )["m"]


def _cancels_waiting():
    """Open provider batches of a cancelled gateway batch whose cancel has not been asked yet."""
    return ProviderBatch.objects.filter(
        state__in=(ChunkState.INTENT, ChunkState.SUBMITTED), batch__status=BatchStatus.CANCELLED
    ).exclude(due_at__lte=timezone.now())


def kick(countdown: float) -> None:
    from .tasks import work_due

    work_due.apply_async(countdown=max(0.0, float(countdown)))


QUEUE = DueQueue(name=NAME, next_due=next_due, kick=kick)


def work_slice(rows: int = ROWS_PER_SLICE) -> dict[str, int]:
    """Group waiting items into provider batches, then work up to ``rows`` due provider batches."""
    _cancels_waiting().update(due_at=timezone.now())
    grouped = 0
    for batch_id in grouping.batches_to_group():
        grouped += len(grouping.group_batch(batch_id))
    claimed = claim_due(
        ProviderBatch.objects.filter(state__in=OPEN_STATES),
        lease_seconds=float(settings.GATEWAY_CLAIM_LEASE_SECONDS),
        limit=rows,
    )
    configs = remote.provider_configs() if claimed else {}
    for row in claimed:
        try:
            lifecycle.work(row, configs)
        except Exception:  # noqa: BLE001 - one chunk's failure must not stop the others; due again after the lease
            log.exception("provider batch %s: step failed; due again after the claim lease", row.id)
    return {"grouped": grouped, "worked": len(claimed)}

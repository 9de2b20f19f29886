"""Cancel delegation: the execution engine owns cancellation (`batches.execution.cancel_batch`).

Until that module exists, a minimal stand-in implements the contract for batches the engine has not
touched: pending items → cancelled, counters updated, a queued/running batch with nothing left in
flight becomes `cancelled`. It is used ONLY when the engine's function cannot be imported.
"""

from __future__ import annotations

import importlib
from uuid import UUID

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from batches.models import TERMINAL_BATCH_STATUSES, Batch, BatchItem, BatchStatus, ItemStatus


def cancel_batch(batch_id: UUID | str) -> None:
    try:
        engine = importlib.import_module("batches.execution")
    except ModuleNotFoundError as exc:
        if exc.name != "batches.execution":
            raise
        _cancel_without_engine(batch_id)
        return
    engine.cancel_batch(batch_id)


@transaction.atomic
def _cancel_without_engine(batch_id: UUID | str) -> None:
    batch = Batch.objects.select_for_update().get(pk=batch_id)
    if batch.status in TERMINAL_BATCH_STATUSES:
        return
    now = timezone.now()
    BatchItem.objects.filter(batch=batch, status=ItemStatus.PENDING).update(
        status=ItemStatus.CANCELLED, finished_at=now
    )
    counts = dict(
        BatchItem.objects.filter(batch=batch).values_list("status").annotate(n=Count("id")).order_by()
    )
    batch.cancelled_count = counts.get(ItemStatus.CANCELLED, 0)
    fields = ["cancelled_count"]
    if not counts.get(ItemStatus.RUNNING):
        batch.status = BatchStatus.CANCELLED
        batch.completed_at = now
        fields += ["status", "completed_at"]
    batch.save(update_fields=fields)

"""A provider batch's line results → its items, through the one result writer
(batches.execution.apply ``apply_results(..., ServedBy.PROVIDER_BATCH)``), and the items it did not
finish back to real time.

Idempotent: only items still claimed by the chunk (``claimed_by=pb:<chunk>``) are touched, so a result
file read twice (a worker killed mid-download, then the row worked again) applies each line once.
A line is one attempt of its item: a result carries ``attempts=1`` and its attempt-log entry; an item
sent back to real time keeps that attempt (``attempts + 1``, the entry appended).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction
from django.db.models import F

from batches.execution.apply import apply_results
from batches.execution.served import Served, ServedBy
from batches.models import BatchItem, ItemStatus, ServedVia
from gateway_engine.batch_api import LineResult
from gateway_engine.items import ItemResult
from gateway_engine.retry import ErrorType
from gateway_engine.routing import ProviderConfig

from .lines import LineVerdict, answer_reader, missing_line, verdict
from .models import ProviderBatch

log = logging.getLogger("provider_batches")


def owned_items(row: ProviderBatch) -> dict[int, BatchItem]:
    """The chunk's items it still holds, by id."""
    qs = BatchItem.objects.filter(id__in=row.item_ids, claimed_by=row.owner, status=ItemStatus.RUNNING)
    return {
        i.id: i
        for i in qs.only(
            "id", "batch_id", "seq", "custom_id", "attempts", "attempt_log", "endpoint", "payload"
        )
    }


def apply_chunk(
    row: ProviderBatch,
    config: ProviderConfig,
    results: Sequence[LineResult],
    *,
    realtime_allowed: bool,
    cancelled: bool,
    latency_ms: int,
) -> tuple[int, int]:
    """Apply every line result of an ended chunk; lines without a result (a failed, cancelled or
    expired provider batch) are ``missing_line``. Returns (written, handed back to real time)."""
    items = owned_items(row)
    by_line = {line.custom_id: line for line in results}
    served: list[Served] = []
    back: list[tuple[BatchItem, LineVerdict]] = []
    for n, item_id in enumerate(row.item_ids):
        item = items.get(item_id)
        if item is None:
            continue  # applied before (a second read of the file), or taken away by a cancel
        line = by_line.get(row.line_id(n))
        if line is None:
            v = missing_line(item.custom_id, config, realtime_allowed=realtime_allowed, cancelled=cancelled)
        else:
            reader = answer_reader(config, item.payload or {}, item.endpoint)
            v = verdict(item.custom_id, config, line, realtime_allowed=realtime_allowed,
                        latency_ms=latency_ms, reader=reader)  # fmt: skip
        if v.result is None:
            back.append((item, v))
        else:
            served.append(Served(item, v.result, ServedBy.PROVIDER_BATCH))
    written = apply_results(str(row.batch_id), served, row.owner).written if served else 0
    handed = to_realtime(row, back)
    ProviderBatch.objects.filter(id=row.id).update(
        applied_count=F("applied_count") + written, realtime_count=F("realtime_count") + handed
    )
    return written, handed


def to_realtime(row: ProviderBatch, back: Sequence[tuple[BatchItem, LineVerdict]]) -> int:
    """Hand items back to the real-time dispatcher (pending, ``served_via`` real time), each keeping
    its line as one attempt. Only items the chunk still holds."""
    if not back:
        return 0
    entries = {item.id: v.entry for item, v in back}
    with transaction.atomic():
        rows = list(
            BatchItem.objects.filter(id__in=list(entries), claimed_by=row.owner, status=ItemStatus.RUNNING)
            .select_for_update()
            .only("id", "attempts", "attempt_log")
        )
        for item in rows:
            item.status = ItemStatus.PENDING
            item.served_via = ServedVia.REALTIME
            item.claimed_by = ""
            item.claim_expires_at = None
            item.attempts = int(item.attempts or 0) + 1
            item.attempt_log = [*(item.attempt_log or []), entries[item.id]]
        BatchItem.objects.bulk_update(
            rows,
            ["status", "served_via", "claimed_by", "claim_expires_at", "attempts", "attempt_log"],
            batch_size=500,
        )
    if rows:
        log.info("provider batch %s: %d items handed back to real time", row.id, len(rows))
    return len(rows)


def cancel_unsent(row: ProviderBatch) -> int:
    """The gateway batch was cancelled before the chunk was created: its items end ``cancelled``
    with no attempt (nothing was sent), through the result writer."""
    items = owned_items(row)
    served = [
        Served(
            item,
            ItemResult(
                custom_id=item.custom_id,
                status="cancelled",
                error_type=ErrorType.CANCELLED,
                error_message="batch cancelled before the item was sent",
            ),
            ServedBy.PROVIDER_BATCH,
        )
        for item in items.values()
    ]
    return apply_results(str(row.batch_id), served, row.owner).written if served else 0


def all_to_realtime(row: ProviderBatch, config: ProviderConfig, *, attempted: bool) -> int:
    """Every item the chunk holds back to real time (its create was refused, e.g. the file failed
    validation). ``attempted``: the provider saw the lines (each counts as an attempt)."""
    items = owned_items(row)
    if not attempted:
        with transaction.atomic():
            n = BatchItem.objects.filter(
                id__in=list(items), claimed_by=row.owner, status=ItemStatus.RUNNING
            ).update(
                status=ItemStatus.PENDING, served_via=ServedVia.REALTIME, claimed_by="", claim_expires_at=None
            )
        ProviderBatch.objects.filter(id=row.id).update(realtime_count=F("realtime_count") + n)
        return n
    back = [
        (item, missing_line(item.custom_id, config, realtime_allowed=True, cancelled=False))
        for item in items.values()
    ]
    n = to_realtime(row, back)
    ProviderBatch.objects.filter(id=row.id).update(realtime_count=F("realtime_count") + n)
    return n

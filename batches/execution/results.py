"""The rows of result writing: finished items in bulk, only rows this worker still owns (exactly one
terminal result per item), batch counters in the same statement. Called only by the one result writer,
batches.execution.apply (``apply_results``), which also accounts what served the items."""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict

from django.db import DataError, connection, transaction
from django.utils import timezone

from batches.models import Batch, BatchItem, ItemStatus
from gateway_engine import ItemResult

from . import journal
from .common import ENGINE_TO_ITEM_STATUS, log

WRITE_BATCH_ROWS = 500


def write_rows(batch_id: str, entries: list[tuple[BatchItem, ItemResult]], owner: str) -> set[int]:
    """Store finished items in bulk. Only rows still running under ``owner``'s claim are written, so
    an item whose claim expired and was taken by another worker keeps exactly one terminal result.
    Returns the ids of the rows written.

    The attempts of a result that cannot be applied still count: they are appended to the item
    (``journal.fold_unapplied``). The journal lists of written items are dropped once the write
    commits.

    PostgreSQL: one ``UPDATE … FROM jsonb_to_recordset(%s) … WHERE claimed_by = me RETURNING`` per
    WRITE_BATCH_ROWS rows, all values in one jsonb parameter (cheap to build; Django's bulk_update
    CASE expressions cost ~10 ms of Python per few rows). Other databases (single-process SQLite): ``bulk_update`` of the owned rows.
    """
    if not owner:
        raise ValueError("writing results needs the claim owner")
    if not entries:
        return set()
    now = timezone.now()
    written: set[int] = set()
    if connection.vendor == "postgresql":
        # one statement per WRITE_BATCH_ROWS rows: rows and batch counters in a single round trip,
        # atomic on its own; several statements share one transaction
        slices = [entries[i : i + WRITE_BATCH_ROWS] for i in range(0, len(entries), WRITE_BATCH_ROWS)]
        with transaction.atomic() if len(slices) > 1 else contextlib.nullcontext():
            for part in slices:
                written |= _update_values(part, owner, now, batch_id)
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
                    expired_count=F("expired_count") + counts[ItemStatus.EXPIRED],
                )
    dropped = [(item, r) for item, r in entries if item.id not in written]
    if dropped:
        log.warning(
            "batch %s: dropped %d results of items no longer claimed by %s", batch_id, len(dropped), owner
        )
        with transaction.atomic():
            if journal.fold_unapplied(owner, batch_id, dropped):
                _refresh_final_stats(batch_id)
    stored = [(str(batch_id), item.custom_id) for item, _ in entries if item.id in written]
    transaction.on_commit(lambda: journal.forget(owner, stored))  # at once outside a transaction
    return written


def _refresh_final_stats(batch_id: str) -> None:
    """A finalized batch whose items gained attempts afterwards: its stats are recomputed."""
    from .finalize import batch_stats

    batch = Batch.objects.filter(id=batch_id, completed_at__isnull=False).first()
    if batch is None:
        return
    stats, _ = batch_stats(batch, int((batch.stats or {}).get("total_elapsed_ms") or 0))
    Batch.objects.filter(id=batch_id).update(stats=stats)


_VALUE_COLUMNS = (
    ("id", "bigint"), ("status", "varchar"), ("provider", "varchar"), ("attempts", "integer"),
    ("latency_ms", "integer"), ("response", "jsonb"), ("error_type", "varchar"),
    ("error_status_code", "smallint"), ("error_message", "text"), ("prompt_tokens", "bigint"),
    ("completion_tokens", "bigint"), ("total_tokens", "bigint"), ("retry_extra_tokens", "bigint"),
    ("attempt_log", "jsonb"), ("native_response", "jsonb"), ("cached_tokens", "bigint"),
    ("cache_write_tokens", "bigint"), ("served_by", "varchar"),
)  # fmt: skip
# what the other databases' bulk_update writes: the same columns, and the claim cleared
RESULT_FIELDS = [name for name, _ in _VALUE_COLUMNS[1:]] + ["claimed_by", "claim_expires_at", "finished_at"]
# attempts, the tokens of unused attempts and the attempt log ADD to what the row already holds:
# attempts folded in from the attempt journal (an earlier claim's requests whose answers were never
# stored, batches.execution.journal) stay counted under the final result
_ADDED = {
    "attempts": "t.attempts + v.attempts",
    "retry_extra_tokens": "t.retry_extra_tokens + v.retry_extra_tokens",
    "attempt_log": "COALESCE(t.attempt_log, '[]'::jsonb) || COALESCE(v.attempt_log, '[]'::jsonb)",
}
_UPDATE_SQL = (
    "WITH u AS (UPDATE {items} AS t SET "
    + ", ".join(f"{name} = {_ADDED.get(name, 'v.' + name)}" for name, _ in _VALUE_COLUMNS[1:])
    + ", claimed_by = '', claim_expires_at = NULL, finished_at = %s "
    "FROM jsonb_to_recordset(%s::jsonb) AS v("
    + ", ".join(f"{name} {kind}" for name, kind in _VALUE_COLUMNS)
    + ") WHERE t.id = v.id AND t.status = %s AND t.claimed_by = %s RETURNING t.id, t.status), "
    "n AS (SELECT count(*) FILTER (WHERE status = %s) AS ok, count(*) FILTER (WHERE status = %s) AS bad, "
    "count(*) FILTER (WHERE status = %s) AS cancelled, count(*) FILTER (WHERE status = %s) AS expired, "
    "count(*) AS total FROM u), "
    "b AS (UPDATE {batches} SET completed_count = completed_count + n.ok, "
    "failed_count = failed_count + n.bad, cancelled_count = cancelled_count + n.cancelled, "
    "expired_count = expired_count + n.expired "
    "FROM n WHERE id = %s AND n.total > 0) "
    "SELECT id FROM u"
)


def _update_values(entries: list[tuple[BatchItem, ItemResult]], owner: str, now, batch_id: str) -> set[int]:
    """One statement for up to WRITE_BATCH_ROWS results: the owned rows and the batch's counters
    (a data-modifying CTE, so one round trip and atomic without a transaction block). Returns the ids
    of the rows written.

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
        return set().union(*(_update_values([entry], owner, now, batch_id) for entry in entries))


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


def _stored_values(result: ItemResult) -> dict:
    """The columns an engine result is stored in (_VALUE_COLUMNS but the id; both write paths)."""
    values = {name: getattr(result, name) for name, _ in _VALUE_COLUMNS[1:]}
    values["status"] = ENGINE_TO_ITEM_STATUS[result.status]
    return values


def _update_values_once(
    entries: list[tuple[BatchItem, ItemResult]], owner: str, now, batch_id: str
) -> set[int]:
    rows = [{"id": item.id, **_stored_values(r)} for item, r in entries]
    sql = _UPDATE_SQL.format(items=BatchItem._meta.db_table, batches=Batch._meta.db_table)
    params = [now, json.dumps(rows, allow_nan=False), ItemStatus.RUNNING, owner]
    params += [
        ItemStatus.SUCCEEDED,
        ItemStatus.FAILED,
        ItemStatus.CANCELLED,
        ItemStatus.EXPIRED,
        str(batch_id),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {int(row[0]) for row in cursor.fetchall()}


def _bulk_update_owned(entries, owner: str, now, counts: dict) -> set[int]:
    owned = {
        row[0]: row[1:]
        for row in BatchItem.objects.select_for_update()
        .filter(id__in=[item.id for item, _ in entries], status=ItemStatus.RUNNING, claimed_by=owner)
        .values_list("id", "attempts", "retry_extra_tokens", "attempt_log")
    }
    rows = []
    for item, result in entries:
        if item.id not in owned:
            continue
        values = _stored_values(result)
        attempts, extra, attempt_log = owned[item.id]  # what the journal folded in before: kept
        values["attempts"] += attempts
        values["retry_extra_tokens"] += extra
        values["attempt_log"] = [*(attempt_log or []), *(values["attempt_log"] or [])]
        counts[values["status"]] += 1
        rows.append(BatchItem(id=item.id, **values, claimed_by="", claim_expires_at=None, finished_at=now))
    if rows:
        BatchItem.objects.bulk_update(rows, RESULT_FIELDS, batch_size=WRITE_BATCH_ROWS)
    return {row.id for row in rows}

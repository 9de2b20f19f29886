"""The one result writer: every finished item is stored through ``apply_results``, whatever served it
(the engine in real time; a provider's batch API, issue #23; the cache, issue #25).

It writes the owner-guarded rows and the batch counters in one statement (batches.execution.results),
so an item whose claim another worker took keeps exactly one terminal result, and a result applied
twice is written once. Then, only for the rows it actually wrote and only for what the engine did not
already account (``Served.accounted_by_engine``), after the write commits:

* the team's budget ledger is charged the reported usage (providers.limits.budgets ``charge_budget``;
  the same tokens the database re-seed counts: total_tokens + retry_extra_tokens), except for answers
  served by the cache, which bill nothing (``Served.billed``);
* the item and token metrics are recorded through the hook observability installs
  (batches.execution.observers ``record_served``);
* the batch is finalized if that was its last open item (stats and TeamUsageDaily come from the
  items' attempt logs there, batches.execution.finalize); a result written after its batch was
  already final (a late one) is added to TeamUsageDaily then (``count_late_usage``).

Real-time results add nothing of these here: admission settled their budget reservation, the engine
observer counted their attempts, and the dispatcher slice finalizes the batches it touched.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from batches.models import Batch, BatchItem
from gateway_engine.endpoints import CHAT
from gateway_engine.items import ItemResult
from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_engine.redis_errors import REDIS_ERRORS
from providers.limits.budgets import charge_budget

from . import observers
from .common import log
from .finalize import count_late_usage, finalize_batch_if_done
from .results import write_rows
from .served import Served, ServedBy
from .steps import hand_off


@dataclass(frozen=True, slots=True)
class Applied:
    """What one apply did: rows written, and results dropped (their item is no longer this owner's)."""

    written: int = 0
    dropped: int = 0


def apply_results(batch_id: str, entries: Sequence[Served], owner: str) -> Applied:
    """Store the finished items of one batch that ``owner`` still claims, and account the ones served
    outside the engine (see the module docstring). Idempotent per item and attempt: a row is written
    only while it runs under ``owner``'s claim, and only written rows are accounted. A pipeline item
    whose step has a next one is moved to it instead (batches.execution.steps ``hand_off``)."""
    rest, moved = hand_off(batch_id, entries, owner)  # pipelines: a step with a next one goes on to it
    written = write_rows(batch_id, [(s.item, s.stored_result) for s in rest], owner) | moved
    outside = _outside_engine(entries, written)
    if outside:
        transaction.on_commit(functools.partial(_account, str(batch_id), outside))
    return Applied(written=len(written), dropped=len(entries) - len(written))


def apply_result(item: BatchItem, result: ItemResult, served_by: ServedBy, owner: str) -> Applied:
    """``apply_results`` for one item."""
    return apply_results(str(item.batch_id), [Served(item, result, served_by)], owner)


def _outside_engine(entries: Sequence[Served], written: set[int]) -> list[Served]:
    """The written results the engine did not account, one per item."""
    seen: set[int] = set()
    out = []
    for entry in entries:
        item_id = entry.item.id
        if entry.accounted_by_engine or item_id not in written or item_id in seen:
            continue
        seen.add(item_id)
        out.append(entry)
    return out


def endpoints_of(items: list[BatchItem]) -> list[str]:
    """Each item's endpoint; those loaded without it are read in one query (never one per item)."""
    deferred = {i.id for i in items if "endpoint" in i.get_deferred_fields()}
    read = dict(BatchItem.objects.filter(id__in=deferred).values_list("id", "endpoint")) if deferred else {}
    return [read.get(i.id, CHAT) if i.id in deferred else i.endpoint for i in items]


def used_tokens(result: ItemResult) -> int:
    """The tokens a stored result counts against its team's budget (as the database re-seed sums them)."""
    return int(result.total_tokens or 0) + int(result.retry_extra_tokens or 0)


def _account(batch_id: str, outside: list[Served]) -> None:
    """After the write committed: budget, metrics, finalize (results served outside the engine)."""
    batch = Batch.objects.filter(id=batch_id).select_related("team").first()
    if batch is None:
        return
    try:
        charge_budget(batch.team, sum(used_tokens(s.result) for s in outside if s.billed))
    except (QuotaStoreUnavailable, *REDIS_ERRORS) as exc:
        # the ledger undercounts until it is re-seeded from the database (which holds these rows)
        log.warning("batch %s: budget ledger not charged for %d results: %s", batch_id, len(outside), exc)
    endpoints = endpoints_of([s.item for s in outside])
    observers.record_served(
        batch_id,
        batch.team.name,
        [(s.result, str(s.served_by), e) for s, e in zip(outside, endpoints, strict=True)],
    )
    if not finalize_batch_if_done(batch_id) or batch.completed_at is None:
        return
    # the batch was final before this apply: its usage did not count these items (a late result)
    count_late_usage(batch_id, [s.item.id for s in outside])

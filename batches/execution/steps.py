"""The step hand-off of pipelines (docs/contract.md §4 "steps"): no barrier between steps.

When an item's step succeeds and its batch has a step after it, the result writer
(batches.execution.apply) hands it here instead of storing a final result: in one owner-guarded
statement the step's outcome is appended to the item's pipeline record (batches.steps), the row
gets the next step's target, payload (the step's template) and provider queue
(``routing.preferred_provider``, as submission queues items), its result columns are cleared, and it
goes back to ``pending``. The dispatcher then claims it like any item, through the same quota pool,
fair share, deadlines and budgets. A failed step, or the last one, is stored as the item's result as
usual (the RESULT's ``steps`` reads the record, batches.selectors). A cancel or a deadline ends the
pending items of every step as it ends any pending item.

A finished step's attempt log and unused-attempt tokens move into its record (the row keeps the
current step's, so RESULT.attempts is the last step's); the batch's stats add them back
(``add_earlier_steps``), so every step's requests count per provider.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from batches.models import Batch, BatchItem, ItemStatus
from batches.scheduling.prefix import prefix_keyer
from batches.steps import PUBLIC_KEYS, Step, answer_text, payload_of, steps_of, target_of
from gateway_engine.items import ItemResult
from gateway_engine.routing import preferred_provider
from gateway_engine.stats import StatsBuilder

from . import journal
from .engine_wiring import load_routing_table
from .served import Served

# the status an earlier step is added to the stats with: neither succeeded nor failed (items are counted
# once, at the step they ended on)
EARLIER_STEP = "step"
CACHE_HIT = "cache"
# what a hand-off writes on the row (the next step's request, the claim and the result cleared)
HANDOFF_FIELDS = (
    "status", "claimed_by", "claim_expires_at", "step_index", "pipeline", "payload", "route",
    "requested_provider", "queue_provider", "moved_from", "prefix_key", "attempts", "retry_extra_tokens",
    "attempt_log", "retry_state", "provider", "latency_ms", "response", "native_response",
    "prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "cache_write_tokens",
)  # fmt: skip


@functools.lru_cache(maxsize=4096)
def batch_steps(batch_id: str) -> tuple[Step, ...]:
    """A batch's steps (set at submission, never changed: cached per process)."""
    raw = Batch.objects.filter(id=batch_id).values_list("steps", flat=True).first()
    return steps_of(raw)


def hand_off(batch_id: str, entries: Sequence[Served], owner: str) -> tuple[list[Served], set[int]]:
    """Move the items whose step succeeded and has a next one to that step. Returns the entries left
    to store as results and the ids of the rows moved (only rows ``owner`` still claims)."""
    steps = batch_steps(str(batch_id))
    if not steps:
        return list(entries), set()
    moving = [s for s in entries if s.result.status == "succeeded" and s.item.step_index + 1 < len(steps)]
    if not moving:
        return list(entries), set()
    moved = _advance(str(batch_id), steps, moving, owner)
    # an item whose claim was lost goes on to the writer, which drops it and keeps its attempts
    return [s for s in entries if s.item.id not in moved], moved


def _advance(batch_id: str, steps: tuple[Step, ...], moving: Sequence[Served], owner: str) -> set[int]:
    table = load_routing_table()
    prefix = prefix_keyer()
    with transaction.atomic():
        owned = {
            row[0]: row[1:]
            for row in BatchItem.objects.select_for_update()
            .filter(id__in=[s.item.id for s in moving], status=ItemStatus.RUNNING, claimed_by=owner)
            .values_list("id", "pipeline", "step_index", "attempts", "retry_extra_tokens", "attempt_log")
        }
        rows: dict[int, BatchItem] = {}
        for entry in moving:
            item = entry.item
            if item.id not in owned or item.id in rows:
                continue  # its claim was lost (the writer drops it), or a second entry of one item
            record, index, attempts, extra, log = owned[item.id]
            done, counted = step_record(steps[index].name, entry.stored_result, attempts, extra, log)
            record = {
                **record,
                "steps": [*record["steps"], done],
                "stats": [*record.get("stats", ()), counted],
            }
            rows[item.id] = _next_step(item, steps[index + 1], index + 1, record, table, batch_id, prefix)
        BatchItem.objects.bulk_update(list(rows.values()), HANDOFF_FIELDS)
        moved = [(batch_id, s.item.custom_id) for s in moving if s.item.id in rows]
        transaction.on_commit(lambda: journal.forget(owner, moved))  # their attempts are in the records
    return set(rows)


def step_record(
    name: str, result: ItemResult, attempts: int, extra: int, log: list | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished step as the record keeps it: its RESULT fields (``steps``), and what the stats count
    of it (``stats``: its provider, attempt log, tokens, unused-attempt tokens; kept apart so the stats
    never read the answers). The attempts the journal folded onto the row before were the step's too."""
    public = result.as_result()
    shown = {"name": name, **{k: public[k] for k in PUBLIC_KEYS[1:]}}
    shown["attempts"] = int(attempts or 0) + result.attempts
    counted = {
        "provider": result.provider,
        "served_by": public["served_by"],
        "attempt_log": [*(log or []), *result.attempt_log],
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "retry_extra_tokens": int(extra or 0) + int(result.retry_extra_tokens or 0),
    }
    return shown, counted


def _next_step(
    item: BatchItem, step: Step, index: int, record: dict, table, batch_id: str, prefix
) -> BatchItem:
    route, provider = target_of(step, record, answer_text(record["steps"][-1]["response"]))
    payload = payload_of(step, record)
    queue = preferred_provider(table, route=route, provider=provider, salt=batch_id, key=item.custom_id)
    return BatchItem(
        id=item.id, status=ItemStatus.PENDING, claimed_by="", claim_expires_at=None, step_index=index,
        pipeline={**record, "step": step.name}, payload=payload, route=route, requested_provider=provider,
        queue_provider=queue, moved_from="", prefix_key=prefix(payload), attempts=0, retry_extra_tokens=0, attempt_log=[],
        retry_state=None, provider="", latency_ms=None, response=None, native_response=None,
        prompt_tokens=None, completion_tokens=None, total_tokens=None, cached_tokens=None,
        cache_write_tokens=None,
    )  # fmt: skip


def add_earlier_steps(builder: StatsBuilder, batch: Batch, item_ids=None) -> None:
    """The stats' share of every finished earlier step of the batch's pipeline items (the row holds only
    the current step's): its requests per provider and its tokens, never another item."""
    if not batch.steps:
        return
    items = BatchItem.objects.filter(batch_id=batch.id, step_index__gt=0)
    if item_ids is not None:
        items = items.filter(id__in=list(item_ids))
    for counted in items.values_list("pipeline__stats", flat=True).iterator(chunk_size=2000):
        for step in counted or ():
            if step.get("served_by") == CACHE_HIT:  # no call, nothing billed
                builder.add_item(EARLIER_STEP, step.get("attempt_log"))
                continue
            builder.add_item(
                EARLIER_STEP,
                step.get("attempt_log"),
                provider=step.get("provider") or "",
                prompt_tokens=step.get("prompt_tokens"),
                completion_tokens=step.get("completion_tokens"),
            )

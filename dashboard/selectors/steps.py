"""The batch page's pipeline table (a batch with ``steps``, docs/contract.md §4): per step, how many
items reached it, are at it (pending, in flight), finished it, failed at it or were ended at it by a
cancel or the deadline. One GROUP BY (step_index, status) over the batch's items."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from batches.models import Batch, BatchItem, ItemStatus
from batches.steps import steps_of

WAITING = (ItemStatus.PENDING, ItemStatus.RUNNING)
ENDED = (ItemStatus.CANCELLED, ItemStatus.EXPIRED)


@dataclass
class StepRow:
    name: str
    target: str  # what the step sends to: its route or provider, its route_by routes, or "the item's"
    answers: str = ""  # route_by's answers and their routes (the team's content: shown with the permission)
    reached: int = 0
    waiting: int = 0  # pending or in flight at this step
    done: int = 0  # finished this step (and went on, or ended the pipeline on it)
    failed: int = 0
    ended: int = 0  # cancelled or expired at this step


def step_rows(batch: Batch) -> list[StepRow]:
    """One row per step of the batch's pipeline ([] for a batch without steps)."""
    steps = steps_of(batch.steps)
    if not steps:
        return []
    rows = [StepRow(s.name, _target(s.route, s.provider, s.route_by), _answers(s.route_by)) for s in steps]
    counts = BatchItem.objects.filter(batch=batch).values_list("step_index", "status").annotate(n=Count("id"))
    for index, status, n in counts.order_by():
        index = min(int(index), len(rows) - 1)
        for earlier in rows[:index]:  # an item at step k finished every step before it
            earlier.reached += n
            earlier.done += n
        row = rows[index]
        row.reached += n
        if status in WAITING:
            row.waiting += n
        elif status == ItemStatus.SUCCEEDED:
            row.done += n
        elif status == ItemStatus.FAILED:
            row.failed += n
        elif status in ENDED:
            row.ended += n
    return rows


def _target(route: str, provider: str, route_by) -> str:
    if route_by:
        return "by answer: " + ", ".join(sorted(set(route_by.values())))
    if route:
        return f"route {route}"
    if provider:
        return f"provider {provider}"
    return "the item's route or provider"


def _answers(route_by) -> str:
    """``answer → route, …``, the default last (jsonb keeps no key order)."""
    pairs = sorted(route_by.items(), key=lambda kv: (kv[0] == "*", kv[0]))
    return ", ".join(f"{k} → {v}" for k, v in pairs)

"""A batch's place in the provider queues and its ETA: the fair order of ``fair.py`` read backwards.

For one provider queue the items served before a batch's own pending items are approximated from the
same rules the dispatcher applies (docs/quota.md "Queue visibility"):

* same team: the batches ``order_batches`` puts first — a higher lane (``fair.effective_lane``, before
  aging), or the same lane and submitted earlier (deadlines and aging are ignored here);
* every other team with pending items in that queue: what start-time fair queuing (``fair.charge``:
  ``n`` items cost ``n / weight`` of virtual time) serves that team while this team works through its
  own items ahead plus the batch's: ``min(their pending, (ahead + ours) × their weight / our weight)``;
* ETA = (ahead + ours) / the provider's configured RPM. In-flight items and retries are ignored.

Pure functions over plain rows (no Django, no I/O): the dashboard reads the rows
(``dashboard.selectors.queues.batch_place``); tested in tests/scheduling/test_place_unit.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from .fair import effective_lane

DEFAULT_WEIGHT = 1


@dataclass(frozen=True)
class QueuedBatch:
    """Pending items of one batch in one provider queue ("" = not tied to one provider yet)."""

    queue: str
    batch_id: Hashable
    team_id: Hashable
    priority: str
    created_at: datetime
    pending: int


@dataclass(frozen=True)
class BatchPlace:
    """Where a batch stands in one provider queue."""

    provider: str
    pending: int  # this batch's pending items in that provider's queue
    ahead_same_team: int
    ahead_other_teams: int
    rpm: int | None  # the provider's configured rate (None: queue not tied to one provider yet)
    eta_seconds: float | None

    @property
    def ahead(self) -> int:
        return self.ahead_same_team + self.ahead_other_teams


def lane_before_aging(priority: str) -> int:
    """The batch's lane rank as ``fair.order_batches`` sees it before any aging (0 = served first)."""
    return effective_lane(priority, 0.0, 0.0)


def served_before(other: QueuedBatch, mine: QueuedBatch) -> bool:
    """Whether the team's fair order serves ``other`` (a batch of the same team) before ``mine``."""
    lane, my_lane = lane_before_aging(other.priority), lane_before_aging(mine.priority)
    return lane < my_lane or (lane == my_lane and other.created_at < mine.created_at)


def served_meanwhile(own_items: int, own_weight: int, their_weight: int, their_pending: int) -> int:
    """Items of another team that the fair order serves while this team is served ``own_items``: equal
    virtual time (``own_items / own_weight``) at their weight, at most what they have pending."""
    return min(their_pending, int(own_items * max(1, their_weight) / max(1, own_weight)))


def eta_seconds(items: int, rpm: int | None) -> float | None:
    """Seconds to serve ``items`` at ``rpm`` requests per minute (None: no configured rate)."""
    return items / (rpm / 60.0) if rpm else None


def place_in_queue(
    mine: QueuedBatch,
    rows: Iterable[QueuedBatch],
    weights: Mapping[Hashable, int],
    rpm: int | None,
) -> BatchPlace:
    """``mine``'s place in its queue among ``rows`` (every batch's pending items, any queue)."""
    same = 0
    others: dict[Hashable, int] = defaultdict(int)
    for row in rows:
        if row.queue != mine.queue or row.batch_id == mine.batch_id:
            continue
        if row.team_id == mine.team_id:
            if served_before(row, mine):
                same += row.pending
        else:
            others[row.team_id] += row.pending
    my_weight = max(1, weights.get(mine.team_id, DEFAULT_WEIGHT))
    other = sum(
        served_meanwhile(same + mine.pending, my_weight, weights.get(team, DEFAULT_WEIGHT), pending)
        for team, pending in others.items()
    )
    return BatchPlace(
        mine.queue, mine.pending, same, other, rpm, eta_seconds(same + other + mine.pending, rpm)
    )


def batch_places(
    batch_id: Hashable,
    rows: Iterable[QueuedBatch],
    weights: Mapping[Hashable, int],
    rpms: Mapping[str, int],
) -> list[BatchPlace]:
    """The batch's place in every queue it has pending items in, by queue name."""
    every = list(rows)
    mine = sorted((row for row in every if row.batch_id == batch_id), key=lambda row: row.queue)
    return [place_in_queue(row, every, weights, rpms.get(row.queue)) for row in mine]

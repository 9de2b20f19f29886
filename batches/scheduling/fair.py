"""Start-time fair queuing (SFQ) over teams per provider, lane order with aging inside a team, sizing.

Fair share per provider — start-time fair queuing (Goyal, Vin & Cheng 1996) with teams as flows:

* every provider has a virtual time ``V`` and every team a finish tag ``F[team]``;
* a backlogged team's start tag is ``S = max(V, F[team])`` — a team that was idle starts at the
  provider's current virtual time, so idling never banks credit;
* the next quantum of items goes to the backlogged team with the smallest start tag (ties: team id);
* serving ``n`` items charges ``F[team] = S + n / weight`` and moves ``V`` to ``S`` (never backwards).

(The SFQ core — FairState, pick_team, charge — is gateway_engine/fair_share.py, shared with the
interactive lane's queue, gateway_engine/quota/fair_gate.py.)

So while several teams are backlogged on one provider each receives items in proportion to its weight,
whatever the number, size or priority of its batches.

Inside a team (``order_batches``): effective lane first (``high`` 0, ``normal`` 1, ``low`` 2, minus one
lane per ``aging_seconds`` the batch has waited, floored at 0 — a starved ``low`` batch becomes
``normal`` after one aging period and ``high`` after two, where submission order lets it through), then
the earliest deadline (none = last), then submission time, then id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from gateway_engine.fair_share import FairState, SfqPick, charge, pick_team

__all__ = [
    "LANE_RANK", "BatchCandidate", "FairState", "SfqPick", "batch_order_key", "buffer_target", "charge",
    "effective_lane", "order_batches", "pick_team", "quantum",
]  # fmt: skip

LANE_RANK: dict[str, int] = {"high": 0, "normal": 1, "low": 2}


@dataclass(frozen=True)
class BatchCandidate:
    """One batch with queued work for a provider (times in epoch seconds)."""

    batch_id: str
    team: str  # the fair-queuing flow (the team's id)
    priority: str = "normal"
    created_at: float = 0.0
    expires_at: float | None = None
    team_name: str = ""  # what budgets, share caps, metrics and logs know the team by


def effective_lane(priority: str, waited_seconds: float, aging_seconds: float) -> int:
    """Lane rank after aging: one lane up per ``aging_seconds`` waited (0 = no aging), never below 0."""
    rank = LANE_RANK.get(priority, LANE_RANK["normal"])
    if aging_seconds > 0 and waited_seconds > 0:
        rank -= int(waited_seconds // aging_seconds)
    return max(0, rank)


def batch_order_key(c: BatchCandidate, now: float, aging_seconds: float) -> tuple[int, float, float, str]:
    lane = effective_lane(c.priority, now - c.created_at, aging_seconds)
    deadline = c.expires_at if c.expires_at is not None else math.inf
    return (lane, deadline, c.created_at, c.batch_id)


def order_batches(cands: Iterable[BatchCandidate], now: float, aging_seconds: float) -> list[BatchCandidate]:
    """A team's batches in service order: effective lane, earliest deadline, submission order."""
    return sorted(cands, key=lambda c: batch_order_key(c, now, aging_seconds))


def quantum(rate_per_second: float, *, lo: int = 1, hi: int = 16) -> int:
    """Items per pick: ~1/10 s of the provider's rate, within [lo, hi] — fine-grained shares at low
    rates, fewer database round trips at high ones."""
    if not math.isfinite(rate_per_second) or rate_per_second <= 0:
        return hi
    return max(lo, min(hi, int(math.ceil(rate_per_second / 10))))


def buffer_target(
    rate_per_second: float,
    max_concurrency: int,
    lookahead_seconds: float,
    *,
    dispatchers: int = 1,
    cap: int = 500,
) -> int:
    """How many claimed-but-unfinished items one of ``dispatchers`` dispatchers keeps per provider: its
    part of what the provider can serve in the next ``lookahead_seconds`` (rate × lookahead) and at
    least its part of the provider's concurrency, at most cap. Small buffers keep the provider-side
    shares close to the claim order (a newcomer waits behind at most ~lookahead of older claims)."""
    n = max(1, dispatchers)
    by_rate = rate_per_second * lookahead_seconds / n if math.isfinite(rate_per_second) else cap
    return max(1, min(cap, max(math.ceil(max_concurrency / n), math.ceil(by_rate))))

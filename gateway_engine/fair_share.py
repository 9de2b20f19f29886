"""Start-time fair queuing (SFQ; Goyal, Vin & Cheng 1996) over teams: the one rule both lanes share.

* a provider has a virtual time ``V`` and every team a finish tag ``F[team]``;
* a backlogged team's start tag is ``S = max(V, F[team])`` — a team that was idle starts at the
  provider's current virtual time, so idling never banks credit;
* the next turn goes to the backlogged team with the smallest start tag (ties: the team's name);
* serving ``n`` of a team's calls or items charges ``F[team] = S + n / weight`` and moves ``V`` to ``S``
  (never backwards).

Batches pick a team per claim with it (batches/scheduling/fair.py, the state in Redis or in-process);
the interactive lane picks which waiting call asks the shared buckets next (quota/fair_gate.py).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["FairState", "SfqPick", "charge", "pick_team"]


@dataclass
class FairState:
    """SFQ state of one provider: virtual time and per-team finish tags."""

    vtime: float = 0.0
    finish: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SfqPick:
    team: str
    start: float


def pick_team(state: FairState, backlogged: Iterable[str]) -> SfqPick | None:
    """The backlogged team (a team → weight mapping, or any iterable of teams) with the smallest start
    tag; None if nobody is backlogged."""
    best: SfqPick | None = None
    for team in sorted(backlogged):
        start = max(state.vtime, state.finish.get(team, 0.0))
        if best is None or start < best.start:
            best = SfqPick(team, start)
    return best


def charge(state: FairState, team: str, items: int, weight: float) -> float:
    """Account ``items`` served for ``team``: F = max(V, F) + items / weight (a weight of at most 0
    counts as 1); V moves to that start tag. Returns the new finish tag. Mutates ``state`` (the batches'
    Redis twin is the Lua script in batches/execution)."""
    start = max(state.vtime, state.finish.get(team, 0.0))
    state.finish[team] = start + items / (weight if weight > 0 else 1)
    state.vtime = max(state.vtime, start)
    return state.finish[team]

"""The interactive lane's queue for one provider in one event loop: which waiting call asks the shared
buckets next, in fair order over teams (docs/engine.md, "Fair order between teams").

A call that cannot go at once (someone else is asking the store, or this loop already has
``max_concurrency`` calls of the provider in flight) waits in its team's FIFO here. Teams take turns by
start-time fair queuing with their weight (gateway_engine/fair_share.py, the rule batches use): one team's
burst delays another team's call by at most its fair share of the turns. One caller at a time holds the
**asking** turn: it takes the bucket token, the lease and the in-flight slot (waiting for them as the
head, holding nothing else); once its request leaves it is **sending** and the next turn is given.

* ``max_provider_share`` caps a team's place, not only its throughput: while other teams wait, a team
  with share ``s`` is charged as if its weight were at most ``s / (1 − s)`` × the other waiting teams'
  weights (so it gets at most ``s`` of the turns); and when the team's own share bucket is what it waits
  for (TeamShareWait), it gives the turn to the other teams until that bucket refills.
* ``max_waiting_calls`` bounds how many of a team's calls wait here at once (every provider of the loop):
  one more is refused with TeamWaitingLimit before it waits or is sent.

No store round trip is added: the order is this loop's; across web processes each process's asking
caller meets the others' at the shared buckets and leases.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..errors import LimitExceeded
from ..fair_share import FairState, charge, pick_team
from .team_quota import TeamLimits
from .types import QuotaError

__all__ = ["FairGate", "FairGates", "Seat", "TeamPlace", "TeamShareWait", "TeamWaitingLimit"]


class TeamShareWait(Exception):
    """An interactive ask (``acquire(step_aside=True)``) waits only on its team's buckets (its share of
    the provider, its RPM / TPM across providers: team_quota.py): the caller
    gives its place in the provider's queue to other teams for ``seconds`` (quota/fair_gate.py)."""

    def __init__(self, provider: str, team: str, seconds: float):
        self.provider, self.team, self.seconds = provider, team, seconds
        super().__init__(
            f"provider {provider}: team {team} waits {seconds:.3f} s for its own limits (share, rpm, tpm)"
        )


class TeamWaitingLimit(QuotaError, LimitExceeded):
    """The team already has ``limit`` interactive calls waiting for quota in this web process: one more
    is refused at once, before it waits or is sent (Team.max_waiting_calls)."""

    status = 429
    code = "team_waiting_limit"

    def __init__(self, team: str, limit: int):
        self.team, self.limit = team, limit
        super().__init__(
            f"team {team} already has {limit} calls waiting for quota on this web process, its limit "
            f"(max_waiting_calls {limit}); retry later or raise the team's max_waiting_calls"
        )


_Turn: TypeAlias = "asyncio.Future[float]"  # resolved with the cost charged for the turn


@dataclass(frozen=True)
class TeamPlace:
    """What a team's call brings to the queue: its weight, its share cap and its waiting limit."""

    team: str
    weight: float = 1.0
    share: float | None = None  # max_provider_share (None or >= 1: no cap)
    max_waiting: int | None = None  # max_waiting_calls (None: no limit)

    @classmethod
    def of(cls, team: str, limits: TeamLimits | None) -> TeamPlace:
        if limits is None:
            return cls(team)
        return cls(team, float(max(1, limits.weight)), limits.max_provider_share, limits.max_waiting_calls)


@dataclass
class Seat:
    """A call's turn at one provider: ``asking`` (taking its quota), then ``sending`` (its request left,
    the answer not in yet), then ``closed``. ``cost``: what its team was charged for it."""

    place: TeamPlace
    cost: float
    state: Literal["asking", "sending", "closed"] = "asking"


class FairGate:
    """One provider's interactive callers in one event loop (module docstring)."""

    def __init__(self, name: str, waiting: dict[str, int]) -> None:
        self.name = name
        self.state = FairState()
        self.asking = 0
        self.sending = 0
        self.capacity = 1
        self._queues: dict[str, collections.deque[_Turn]] = {}
        self._places: dict[str, TeamPlace] = {}  # the latest place of each queued team
        self._capped: dict[str, float] = {}  # team -> loop time its share bucket has refilled
        self._waiting = waiting  # team -> its calls waiting in this loop (every provider's gate)
        self._timer: asyncio.TimerHandle | None = None

    def queued(self, team: str | None = None) -> int:
        """Calls waiting here (of ``team``)."""
        if team is not None:
            return len(self._queues.get(team, ()))
        return sum(len(q) for q in self._queues.values())

    def try_enter(self, place: TeamPlace, capacity: int) -> Seat | None:
        """The asking turn at once if nobody waits, nobody asks and a seat is free; else None."""
        self.capacity = max(1, int(capacity))
        if self._queues or self.asking or self.sending >= self.capacity:
            return None
        return self._seat(place)

    async def wait(self, place: TeamPlace, capacity: int) -> Seat:
        """Wait in the team's line for the asking turn (TeamWaitingLimit at once if the team already
        has ``max_waiting`` calls waiting)."""
        self.capacity = max(1, int(capacity))
        limit = place.max_waiting
        if limit is not None and self._waiting.get(place.team, 0) >= limit:
            raise TeamWaitingLimit(place.team, limit)
        turn: _Turn = asyncio.get_running_loop().create_future()
        self._line(place).append(turn)
        self.pump()
        return Seat(place, await self._await(place.team, turn))

    async def step_aside(self, seat: Seat, seconds: float) -> None:
        """The asking caller waits only for its team's share bucket: give the turn to the other teams
        (its charge refunded) until that bucket has refilled, then wait for the turn again at the front
        of its team's line (the same seat asks again; closed if the caller gives up meanwhile)."""
        team = seat.place.team
        loop = asyncio.get_running_loop()
        self._capped[team] = max(self._capped.get(team, 0.0), loop.time() + max(0.0, seconds))
        self.state.finish[team] = self.state.finish.get(team, 0.0) - seat.cost
        self._leave(seat)
        turn: _Turn = loop.create_future()
        self._line(seat.place).appendleft(turn)
        self.pump()
        seat.cost = await self._await(team, turn)
        seat.state = "asking"

    def sent(self, seat: Seat) -> None:
        """The seat's request is leaving: the next caller may ask."""
        if seat.state == "asking":
            seat.state = "sending"
            self.asking -= 1
            self.sending += 1
            self.pump()

    def close(self, seat: Seat) -> None:
        """The seat is given back (answer in, or it never got to send)."""
        self._leave(seat)
        self.pump()

    def pump(self) -> None:
        """Give the asking turn to the next team in fair order, if it is free."""
        while not self.asking and self.sending < self.capacity and self._queues:
            now = asyncio.get_running_loop().time()
            ready = [t for t in self._queues if self._capped.get(t, 0.0) <= now]
            if not ready:
                self._wake_at(min(self._capped[t] for t in self._queues))
                return
            pick = pick_team(self.state, ready)
            assert pick is not None  # ready is not empty
            line = self._queues[pick.team]
            turn = line.popleft()
            if not line:
                del self._queues[pick.team]
                self._capped.pop(pick.team, None)
            if not turn.done():  # a cancelled waiter: the next one
                turn.set_result(self._grant(self._places[pick.team]))

    def _seat(self, place: TeamPlace) -> Seat:
        return Seat(place, self._grant(place))

    def _grant(self, place: TeamPlace) -> float:
        """The asking turn to a call of ``place``'s team: its team charged, the cost returned."""
        weight = self._weight(place)
        charge(self.state, place.team, 1, weight)
        self.asking += 1
        return 1.0 / weight

    def _weight(self, place: TeamPlace) -> float:
        """The team's weight for this turn: capped while other teams wait (max_provider_share)."""
        share = place.share
        if share is None or share >= 1.0:
            return place.weight
        others = sum(self._places[t].weight for t in self._queues if t != place.team)
        if others <= 0:
            return place.weight
        return min(place.weight, share / (1.0 - share) * others)

    def _line(self, place: TeamPlace) -> collections.deque[_Turn]:
        self._places[place.team] = place
        line = self._queues.get(place.team)
        if line is None:
            line = self._queues[place.team] = collections.deque()
        return line

    def _leave(self, seat: Seat) -> None:
        if seat.state == "asking":
            self.asking -= 1
        elif seat.state == "sending":
            self.sending -= 1
        seat.state = "closed"

    async def _await(self, team: str, turn: _Turn) -> float:
        self._waiting[team] = self._waiting.get(team, 0) + 1
        try:
            return await turn
        except BaseException:
            if turn.done() and not turn.cancelled():  # granted just as the caller gave up: pass it on
                self.asking -= 1
                self.pump()
            else:
                self._drop(team, turn)
            raise
        finally:
            left = self._waiting[team] - 1
            if left:
                self._waiting[team] = left
            else:
                del self._waiting[team]

    def _drop(self, team: str, turn: _Turn) -> None:
        line = self._queues.get(team)
        if line is not None and turn in line:
            line.remove(turn)
            if not line:
                del self._queues[team]
                self._capped.pop(team, None)

    def _wake_at(self, when: float) -> None:
        timer = self._timer
        if timer is not None and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.pump()


class FairGates:
    """Every provider's FairGate of one Admission (one event loop), and the teams' waiting counts."""

    def __init__(self) -> None:
        self.waiting: dict[str, int] = {}
        self._gates: dict[str, FairGate] = {}

    def gate(self, provider: str) -> FairGate:
        gate = self._gates.get(provider)
        if gate is None:
            gate = self._gates[provider] = FairGate(provider, self.waiting)
        return gate

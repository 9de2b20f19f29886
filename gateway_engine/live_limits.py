"""``LiveLimits``: a run's view of the current provider and team limits (the ``LimitsProvider``, or
the routing table's limits without one)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from .protocols import LimitsProvider
from .quota.fair_gate import TeamShareWait
from .quota.ledger import BudgetSeed
from .quota.team_quota import TeamLimits, TeamQuota
from .quota.types import ProviderLimits, Reservation
from .routing import ProviderConfig

__all__ = ["LiveLimits", "TeamAsk", "TeamTurns"]


@dataclass(frozen=True)
class TeamAsk:
    """An item's team as admission asks for it: its limits when admission started (the fair queue's
    weight and waiting limit) and its live quota (share cap, RPM / TPM) for every grant and settle."""

    limits: TeamLimits | None
    current: Callable[[], TeamQuota | None]

    def live(self, reservation: Reservation, current: Callable[[], ProviderLimits]) -> Reservation:
        """The grant with its live limits: the settle and the give-back use them (Reservation.current)."""
        return replace(reservation, current=current, current_team=self.current)


class TeamTurns:
    """A run's batch items whose team's own buckets (share cap, RPM / TPM) are short: they wait holding no
    slot of the provider's gate, so the provider's other teams go on (no head-of-line blocking), and
    the items of one team wait one behind the other, each the time the store computed."""

    def __init__(self) -> None:
        self._turns: dict[str, asyncio.Lock] = {}

    async def wait(self, capped: TeamShareWait) -> None:
        turn = self._turns.setdefault(capped.team, asyncio.Lock())
        async with turn:
            await asyncio.sleep(capped.seconds + random.uniform(0.0, 0.002))


class LiveLimits:
    """Provider limits, team limits and the budget seed, live when a ``LimitsProvider`` is given."""

    def __init__(self, source: LimitsProvider | None) -> None:
        self.source = source

    async def provider(self, config: ProviderConfig) -> ProviderLimits:
        source = self.source
        if source is None:
            return config.limits
        try:
            return await source.get(config.name)
        except LookupError:  # provider deleted mid-run: keep the limits the run started with
            return config.limits

    async def team(self, team: str) -> TeamLimits | None:
        """The item's team's live limits (budgets, share cap); None without a team or limits source."""
        source = self.source
        if not team or source is None:
            return None
        return await source.team(team)

    @property
    def budget_seed(self) -> BudgetSeed | None:
        return self.source.budget_seed if self.source is not None else None

    def current(self, limits: ProviderLimits) -> Callable[[], ProviderLimits]:
        """The provider's current cached limits (for waiters that re-ask the bucket, and for settling: a
        change applies to items already waiting)."""
        source = self.source
        if source is None:
            return lambda: limits
        return lambda: source.peek(limits.name, limits)

    def team_ask(self, team: str, limits: TeamLimits | None) -> TeamAsk:
        """The item's team for admission (``limits``: what ``team()`` answered)."""
        return TeamAsk(limits, self.current_team(team, limits.quota() if limits is not None else None))

    def current_team(self, team: str, asked: TeamQuota | None) -> Callable[[], TeamQuota | None]:
        """The team's current cached quota (share cap, RPM / TPM limits), like ``current``: a limit
        changed in the admin applies to the team's next grant, waiting or not."""
        source = self.source
        if source is None or not team:
            return lambda: asked

        def current() -> TeamQuota | None:
            team_limits = source.peek_team(team)
            return team_limits.quota() if team_limits is not None else None

        return current

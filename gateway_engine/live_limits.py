"""``LiveLimits``: a run's view of the current provider and team limits (the ``LimitsProvider``, or
the routing table's limits without one)."""

from __future__ import annotations

from collections.abc import Callable

from .protocols import LimitsProvider
from .quota.ledger import BudgetSeed
from .quota.types import ProviderLimits, TeamLimits
from .routing import ProviderConfig

__all__ = ["LiveLimits"]


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

    def current(self, limits: ProviderLimits, team: str) -> Callable[[], ProviderLimits]:
        """The provider's current cached limits with the team's current share cap (for waiters that
        re-ask the bucket, and for settling: a change applies to items already waiting)."""
        source = self.source
        if source is None:
            return lambda: limits

        def current() -> ProviderLimits:
            team_limits = source.peek_team(team) if team else None
            share = team_limits.max_provider_share if team_limits is not None else None
            return source.peek(limits.name, limits).for_team(team, share)

        return current

"""The team token-budget ledger: the abstract base, with reserve / settle / give back / seed on top.

A backend implements the atomic primitives over counter keys, one per team and UTC period (``key``,
``try_reserve``, ``adjust``, ``get``, ``seed``, ``delete``): Redis strings with a TTL (redis_ledger.py)
or a dict (local_ledger.py). A missing key (first use of a period, or Redis lost it) is seeded from the
caller's records (``BudgetSeed``; the Django side reads the database).
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from .team_quota import TeamLimits
from .types import BudgetExceeded, BudgetReservation

# seed(team, period ("day" | "month"), key suffix) -> tokens already used in that period
BudgetSeed = Callable[[str, str, str], int]


class BudgetLedger(ABC):
    """Tokens used per team and UTC day / month, shared by every worker of the backend."""

    # ---- atomic primitives (the backends) ------------------------------------------------------------
    @abstractmethod
    def key(self, team: str, suffix: str) -> str:
        """The ledger key of the team's period (``suffix`` from TeamLimits.budgets)."""

    @abstractmethod
    async def try_reserve(self, keys: list[str], tokens: int, limits: list[int]) -> tuple[int, int, int]:
        """Atomically: (0, 0, 0) every key += tokens; (2, i, 0) key i missing; (1, i, used) no room
        (a limit of -1: no budget, counted only)."""

    @abstractmethod
    async def adjust(self, keys: list[str], delta: int) -> None:
        """Every existing key += delta (not below 0); missing keys stay missing."""

    @abstractmethod
    async def get(self, keys: list[str]) -> list[int | None]:
        """Each key's count (None: missing)."""

    @abstractmethod
    async def seed(self, key: str, used: int, ttl_seconds: int) -> None:
        """Set the key to `used` unless it exists (another worker seeded it first)."""

    @abstractmethod
    async def delete(self, keys: list[str]) -> None:
        """Drop the keys (missing ones are ignored)."""

    # ---- the ledger's operations ---------------------------------------------------------------------
    async def reserve_budget(
        self, team: TeamLimits, tokens: int, seed: BudgetSeed | None = None, *, now_s: float | None = None
    ) -> BudgetReservation:
        """Reserve `tokens` against the team's UTC day and month ledgers, atomically: both or neither.

        Raises BudgetExceeded (nothing taken) if a period with a budget has no room. A ledger key
        that is missing (first use of the period, or Redis lost it) is seeded with
        ``seed(team, period, key_suffix)`` (sync, run in a thread; the Django side reads the database)
        and the reservation is tried again. Periods without a budget are counted too, so a budget
        set later starts from the right number (the engine only calls this for teams with a budget; the
        ledger of a team whose budgets are removed is dropped, see forget_budget)."""
        tokens = max(0, int(tokens))
        periods = team.budgets(time.time() if now_s is None else now_s)
        keys = [self.key(team.name, suffix) for _, suffix, _, _ in periods]
        caps = [-1 if limit is None else int(limit) for _, _, limit, _ in periods]
        for _ in range(len(keys) + 2):
            status, index, used = await self.try_reserve(keys, tokens, caps)
            if status == 0:
                return BudgetReservation(team.name, tuple(keys), tokens)
            period, suffix, limit, ttl = periods[index]
            if status == 1:
                raise BudgetExceeded(team.name, period, caps[index], int(used), tokens)
            await self.seed(keys[index], await self._seed_value(team, period, suffix, seed), ttl)
        raise RuntimeError(f"team {team.name}: budget ledger keys keep disappearing")

    async def budget_usage(
        self, team: TeamLimits, seed: BudgetSeed | None = None, *, now_s: float | None = None
    ) -> list[tuple[str, int | None, int]]:
        """[(period, limit or None, used)] for the UTC day and month (seeding missing ledgers)."""
        periods = team.budgets(time.time() if now_s is None else now_s)
        keys = [self.key(team.name, suffix) for _, suffix, _, _ in periods]
        values = await self.get(keys)
        out = []
        for key, value, (period, suffix, limit, ttl) in zip(keys, values, periods, strict=True):
            if value is None:
                await self.seed(key, await self._seed_value(team, period, suffix, seed), ttl)
                value = (await self.get([key]))[0] or 0
            out.append((period, limit, int(value)))
        return out

    async def forget_budget(self, team: TeamLimits, *, now_s: float | None = None) -> None:
        """Drop the team's ledger for today and this month (its budgets were removed: the ledger stops
        counting, and must be re-seeded from the database if a budget is set again)."""
        periods = team.budgets(time.time() if now_s is None else now_s)
        await self.delete([self.key(team.name, suffix) for _, suffix, _, _ in periods])

    @staticmethod
    async def _seed_value(team: TeamLimits, period: str, suffix: str, seed: BudgetSeed | None) -> int:
        if seed is None:
            return 0
        return max(0, int(await asyncio.to_thread(seed, team.name, period, suffix)))

    async def settle_budget(self, budget: BudgetReservation, actual_tokens: int) -> None:
        """Replace the reserved estimate by the provider's reported usage (refund or add). Once."""
        if budget.settled:
            return
        budget.settled = True
        delta = int(actual_tokens) - budget.tokens
        if delta:
            await self.adjust(list(budget.keys), delta)

    async def charge_budget(self, team: TeamLimits, tokens: int, *, now_s: float | None = None) -> None:
        """Count tokens used without a reservation (an item served outside the engine: a provider's
        batch API, the cache): every existing period key += tokens, never refused. A missing key stays
        missing: its seed reads the records, which already hold these tokens once they are stored."""
        tokens = max(0, int(tokens))
        if not tokens:
            return
        periods = team.budgets(time.time() if now_s is None else now_s)
        await self.adjust([self.key(team.name, suffix) for _, suffix, _, _ in periods], tokens)

    async def give_back_budget(self, budget: BudgetReservation) -> None:
        """Nothing was used (not sent, or no usage reported): the reservation is refunded. Once."""
        await self.settle_budget(budget, 0)

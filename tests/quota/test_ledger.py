"""The team budget ledger (gateway_engine/quota/ledger.py and its backends): reserve, settle, give back,
seed a missing period, against the in-process store AND the Redis store (conftest.py).
"""

from __future__ import annotations

import asyncio
import random

import pytest

from gateway_engine.quota import BudgetExceeded, Reservation, TeamLimits

from .conftest import make_limits, run


def _team(name, daily=None, monthly=None):
    return TeamLimits(name, daily_token_budget=daily, monthly_token_budget=monthly)


def test_budget_reserve_settle_and_refuse(store):
    team = _team(f"team-{random.randrange(10**9)}", daily=1000, monthly=5000)

    async def body():
        res = await store.reserve_budget(team, 600)
        assert [(p, used) for p, _, used in await store.budget_usage(team)] == [("day", 600), ("month", 600)]
        with pytest.raises(BudgetExceeded) as info:
            await store.reserve_budget(team, 500)
        exc = info.value
        assert (exc.period, exc.limit, exc.used, exc.remaining) == ("day", 1000, 600, 400)
        assert "daily token budget of 1000" in str(exc)
        await store.settle_budget(res, 250)  # the provider reported less: refund 350
        await store.settle_budget(res, 9999)  # a second settle is ignored
        assert [used for _, _, used in await store.budget_usage(team)] == [250, 250]
        res2 = await store.reserve_budget(team, 700)
        await store.give_back_budget(res2)  # never sent
        assert [used for _, _, used in await store.budget_usage(team)] == [250, 250]
        res3 = await store.reserve_budget(team, 750)  # exactly up to the limit
        await store.settle_budget(res3, 800)  # overage is charged: usage may pass the limit by it
        assert [used for _, _, used in await store.budget_usage(team)] == [1050, 1050]
        with pytest.raises(BudgetExceeded):
            await store.reserve_budget(team, 1)

    run(store, body)


def test_budget_month_refuses_while_day_has_room(store):
    team = _team(f"team-{random.randrange(10**9)}", daily=None, monthly=100)

    async def body():
        await store.reserve_budget(team, 100)
        with pytest.raises(BudgetExceeded) as info:
            await store.reserve_budget(team, 1)
        assert info.value.period == "month" and info.value.used == 100
        # nothing was taken by the refused call, in either period
        assert [used for _, _, used in await store.budget_usage(team)] == [100, 100]

    run(store, body)


def test_budget_is_never_overdrawn_by_concurrent_reservations(store):
    team = _team(f"team-{random.randrange(10**9)}", daily=10_000)

    async def body():
        async def one():
            try:
                await store.reserve_budget(team, 300)
                return 1
            except BudgetExceeded:
                return 0

        granted = sum(await asyncio.gather(*(one() for _ in range(80))))
        assert granted == 33  # floor(10_000 / 300)
        assert (await store.budget_usage(team))[0][2] == 9_900

    run(store, body)


def test_missing_ledger_is_seeded_once(store):
    team = _team(f"team-{random.randrange(10**9)}", daily=1000)
    calls = []

    def seed(name, period, suffix):
        calls.append((name, period, suffix))
        return 900 if period == "day" else 4000

    async def body():
        with pytest.raises(BudgetExceeded) as info:
            await store.reserve_budget(team, 200, seed)
        assert info.value.used == 900
        await store.reserve_budget(team, 100, seed)
        assert [used for _, _, used in await store.budget_usage(team, seed)] == [1000, 4100]
        assert sorted(p for _, p, _ in calls) == ["day", "month"]  # each period seeded exactly once
        assert calls[0][2].startswith("d:") or calls[0][2].startswith("m:")

    run(store, body)


def test_budget_periods_are_utc_day_and_month():
    team = _team("t", daily=5, monthly=7)
    # 2026-01-31 23:59:30 UTC
    periods = team.budgets(1769903970.0)
    assert [(p, s, limit) for p, s, limit, _ in periods] == [
        ("day", "d:2026-01-31", 5),
        ("month", "m:2026-01", 7),
    ]
    assert 3600 <= periods[0][3] <= 3630  # 30 s left in the day, plus an hour of slack


def test_reconcile_settles_the_budget_reserved_with_the_grant(store):
    team = _team(f"team-{random.randrange(10**9)}", daily=1000)
    limits = make_limits()

    async def body():
        budget = await store.reserve_budget(team, 300)
        granted = await store.acquire(limits, 300)
        await store.reconcile(limits, Reservation(granted.provider, granted.tokens, budget=budget), 120)
        assert budget.settled
        assert [used for _, _, used in await store.budget_usage(team)] == [120, 120]
        await store.give_back_budget(budget)  # already settled: nothing changes
        assert [used for _, _, used in await store.budget_usage(team)] == [120, 120]

    run(store, body)


def test_forgotten_ledger_is_seeded_again(store):
    team = _team(f"team-{random.randrange(10**9)}", daily=1000)

    async def body():
        await store.reserve_budget(team, 400)
        await store.forget_budget(team)
        assert [used for _, _, used in await store.budget_usage(team, lambda *_: 50)] == [50, 50]

    run(store, body)


def test_a_charge_counts_served_tokens_without_refusing_and_leaves_a_missing_ledger_missing(store):
    """charge_budget (a result served outside the engine: already used, so never refused): existing
    periods += tokens, past the limit too; a missing period stays missing and its seed counts them."""
    team = _team(f"team-{random.randrange(10**9)}", daily=100, monthly=1000)

    async def body():
        await store.charge_budget(team, 40)  # no ledger yet: nothing to add to
        assert [used for _, _, used in await store.budget_usage(team, lambda *_: 40)] == [40, 40]
        await store.charge_budget(team, 90)  # over the daily budget: charged, not refused
        await store.charge_budget(team, 0)
        assert [used for _, _, used in await store.budget_usage(team)] == [130, 130]
        with pytest.raises(BudgetExceeded):
            await store.reserve_budget(team, 1)

    run(store, body)

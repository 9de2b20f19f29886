"""Team limits in the quota engine, against the in-process store AND the Redis store: the per-(provider,
team) share bucket, the budget ledger (reserve / settle / give back / seed), and the jitter margin."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from gateway_engine.quota import BudgetExceeded, TeamLimits
from providers.adapters import provider_limits

from .conftest import assert_within_rate, make_limits, run


def test_share_cap_limits_a_team_to_its_share(store):
    base = make_limits(rpm=600, burst_seconds=10.0)  # 10/s, capacity 100
    capped = base.for_team("t1", 0.25)  # 2.5/s, capacity 25
    other = base.for_team("t2", None)

    async def body():
        granted = 0
        for _ in range(60):
            granted += (await store.try_acquire(capped)).granted
        assert granted == 25  # the team's burst, although the provider bucket had 100
        denied = await store.try_acquire(capped)
        assert not denied.granted and 200 <= denied.wait_ms <= 400  # one team token refills in 400 ms
        # the provider's own buckets gave exactly 25 away: another team still gets the rest (plus what
        # refilled meanwhile at 10/s)
        others = 0
        for _ in range(100):
            others += (await store.try_acquire(other)).granted
        assert 75 <= others <= 80

    run(store, body)


def test_share_cap_holds_under_concurrency_and_releases_give_back(store):
    limits = make_limits(rpm=6000, burst_seconds=0.5).for_team("t1", 0.2)  # 20/s, capacity 10

    async def body():
        grants: list[tuple[float, int]] = []
        deadline = time.monotonic() + 1.0

        async def caller():
            while time.monotonic() < deadline:
                decision = await store.try_acquire(limits)
                if decision.granted:
                    grants.append((decision.now_ms, 1))
                else:
                    await asyncio.sleep(decision.wait_ms / 1000 * random.uniform(1, 1.2))

        await asyncio.gather(*(caller() for _ in range(6)))
        assert len(grants) >= 20
        assert_within_rate(grants, limits.team_rpm_per_ms, limits.team_rpm_capacity, "team rpm")

        fresh = make_limits(rpm=600, burst_seconds=1.0).for_team("t9", 0.2)  # team capacity 2
        res = await store.acquire(fresh)
        await store.acquire(fresh)
        assert not (await store.try_acquire(fresh)).granted
        await store.release(fresh, res)  # gives back the team token too
        assert (await store.try_acquire(fresh)).granted

    run(store, body)


def test_margin_takes_from_burst_not_from_rate():
    plain = make_limits(rpm=600, tpm=60_000, burst_seconds=5.0)
    margin = make_limits(rpm=600, tpm=60_000, burst_seconds=5.0)
    margin = type(margin)(**{**margin.__dict__, "margin_seconds": 0.5})
    assert plain.rpm_capacity == 50 and margin.rpm_capacity == 45
    assert margin.tpm_capacity == 4_500
    assert margin.rpm_per_ms == plain.rpm_per_ms and margin.tpm_per_ms == plain.tpm_per_ms


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


def test_margin_comes_from_settings_and_is_at_most_half_the_burst(settings):
    from types import SimpleNamespace

    row = SimpleNamespace(
        name="p", rpm=600, tpm=6000, burst_seconds=2.0, max_concurrency=1, timeout_seconds=5
    )
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 0.25
    limits = provider_limits(row)
    assert limits.margin_seconds == 0.25 and limits.rpm_capacity == 17.5 and limits.tpm_capacity == 175
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 5.0
    assert provider_limits(row).margin_seconds == 1.0  # half the burst
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 0.0
    assert provider_limits(row).rpm_capacity == 20
    # a team capped at 0.1 of 600 rpm: 1/s, burst (2 − 0.25) s → 1.75; never below one request
    capped = provider_limits(row, margin_seconds=0.25).for_team("t", 0.1)
    assert capped.team_rpm_per_ms == pytest.approx(1 / 1000) and capped.team_rpm_capacity == 1.75
    assert provider_limits(row).for_team("t", 0.01).team_rpm_capacity == 1.0
    assert capped.for_team("t", None).team_capped is False

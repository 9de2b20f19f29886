"""A team's RPM / TPM buckets across all providers (gateway_engine/quota/team_quota.py), granted in the
same atomic step as the provider's buckets (lua.py ACQUIRE with lua_team.py; local_buckets.py with
local_team.py), settled to the actual tokens like the provider's TPM, given back on release.

Every test taking ``store`` runs against the in-process store AND the Redis store (conftest.py).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

import pytest

from gateway_engine.quota import QuotaImpossible, TeamQuota

from .conftest import assert_within_rate, make_limits, run

BIG = {"rpm": 60_000, "tpm": 6_000_000, "burst_seconds": 1.0}  # providers that never bind here


def test_the_team_tpm_bucket_spans_every_provider(store):
    one, two = make_limits(**BIG), make_limits(**BIG)
    team = TeamQuota("acme", tpm=600, burst_seconds=6.0)  # holds 60 tokens, refills 9 tokens/s
    assert team.tpm_rate[1] == 60 and team.tpm_rate[0] == pytest.approx(9 / 1000)

    async def body():
        granted = 0
        for i in range(12):
            granted += (await store.try_acquire(one if i % 2 else two, 10, team=team)).granted
        assert granted == 6  # the team's burst, over both providers together
        denied = await store.try_acquire(one, 10, team=team)
        assert not denied.granted and denied.team_wait  # only the team's bucket is short
        assert 0 < denied.wait_ms <= 1200  # 10 tokens at 9 tokens/s
        # the providers still have their room: another team, and the team without limits, get it
        assert (await store.try_acquire(one, 10, team=TeamQuota("other"))).granted
        assert (await store.try_acquire(two, 10)).granted

    run(store, body)


def test_the_team_rpm_bucket_counts_requests(store):
    limits = make_limits(**BIG)
    team = TeamQuota("acme", rpm=60, burst_seconds=5.0)  # 5 requests, then 55/min

    async def body():
        results = [(await store.try_acquire(limits, 1000, team=team)).granted for _ in range(8)]
        assert results == [True] * 5 + [False] * 3

    run(store, body)


def test_every_bucket_grants_or_none_does(store):
    limits = make_limits(rpm=600, tpm=60_000, burst_seconds=1.0)  # 10 requests, 1,000 tokens
    team = TeamQuota("acme", tpm=60_000, burst_seconds=1.0)  # 1,000 tokens

    async def body():
        assert (await store.try_acquire(limits, 900, team=team)).granted
        denied = await store.try_acquire(limits, 200, team=team)  # both short: nothing is taken
        assert not denied.granted and not denied.team_wait
        state = await store.team_snapshot(team)
        assert 100 <= state.tpm_available < 200 and state.requests_last_minute == 1
        assert state.tokens_last_minute == 900

    run(store, body)


def test_release_gives_the_team_tokens_back_and_reconcile_settles_them(store):
    limits = make_limits(**BIG)
    team = TeamQuota("acme", rpm=600, tpm=6_000, burst_seconds=10.0)  # 100 requests, 1,000 tokens

    async def body():
        first = await store.acquire(limits, 400, team=team)
        await store.acquire(limits, 400, team=team)
        assert not (await store.try_acquire(limits, 400, team=team)).granted
        await store.release(limits, first)
        assert (await store.try_acquire(limits, 400, team=team)).granted  # the 400 came back
        settled = await store.acquire(limits, 150, team=team, max_wait_seconds=30)
        before = (await store.team_snapshot(team)).tpm_available
        await store.reconcile(limits, settled, 50)  # the provider reported 50: 100 refunded
        state = await store.team_snapshot(team)
        assert state.tpm_available == pytest.approx(before + 100, abs=2)
        assert state.tokens_last_minute == 400 + 400 + 50  # the released grant is not counted
        assert state.requests_last_minute == 3

    run(store, body)


def test_a_request_above_the_team_tpm_bucket_is_impossible_at_once(store):
    limits = make_limits(**BIG)
    team = TeamQuota("acme", tpm=600, burst_seconds=6.0)  # 60 tokens

    async def body():
        with pytest.raises(QuotaImpossible, match="team TPM"):
            await store.acquire(limits, 61, team=team)
        assert (await store.try_acquire(limits, 61, team=team)).impossible

    run(store, body)


def test_concurrent_grants_over_two_providers_never_exceed_the_team_bucket(store):
    one, two = make_limits(**BIG), make_limits(**BIG)
    team = TeamQuota("acme", tpm=60_000, burst_seconds=0.5)  # 500 tokens, ~983 tokens/s

    async def body():
        grants: list[tuple[float, int]] = []
        rng = random.Random(7)
        deadline = time.monotonic() + 1.0

        async def caller(limits):
            while time.monotonic() < deadline:
                n = rng.randint(20, 120)
                decision = await store.try_acquire(limits, n, team=team)
                if decision.granted:
                    grants.append((decision.now_ms, n))
                else:
                    await asyncio.sleep(decision.wait_ms / 1000 * rng.uniform(1, 1.2))

        await asyncio.gather(*(caller(one if i % 2 else two) for i in range(6)))
        assert sum(n for _, n in grants) >= 900  # pressed against the limit
        assert_within_rate(grants, *team.tpm_rate, "team tpm")

    run(store, body)


def test_a_waiter_asks_with_the_teams_live_limits(store):
    limits = make_limits(**BIG)
    capped = TeamQuota("acme", rpm=6, burst_seconds=10.0)  # 1 request, then one per ~11 s
    live = {"quota": capped}

    async def body():
        assert (await store.try_acquire(limits, team=capped)).granted
        waiter = asyncio.create_task(
            store.acquire(limits, team=capped, current_team=lambda: live["quota"], max_wait_seconds=30)
        )
        await asyncio.sleep(0.2)
        assert not waiter.done()
        live["quota"] = TeamQuota("acme")  # the limit is lifted (the admin): the next ask passes
        async with asyncio.timeout(15):
            reservation = await waiter
        assert reservation.team == TeamQuota("acme")

    run(store, body)


def test_a_team_without_limits_touches_no_team_key(store, redis_sync):
    limits = make_limits(**BIG)

    async def body():
        for team in (None, TeamQuota("plain"), TeamQuota("shared", share=0.5)):
            reservation = await store.acquire(limits, 10, team=team)
            await store.reconcile(limits, reservation, 5)
        state = await store.team_snapshot(TeamQuota("plain"))
        assert state.rpm_limit is None and state.requests_last_minute == 0

    run(store, body)
    if store.backend == "redis":
        assert list(redis_sync.scan_iter(match=f"{store.prefix}team:*")) == []


def test_a_grant_gives_back_only_to_the_team_buckets_it_took_from(store):
    limits = make_limits(**BIG)
    live = {"quota": TeamQuota("acme")}

    async def body():
        taken = await store.acquire(limits, 100, team=live["quota"])
        taken = replace(taken, current_team=lambda: live["quota"])  # as admission hands it on
        live["quota"] = TeamQuota("acme", tpm=600, burst_seconds=6.0)  # a limit set after that grant
        await store.acquire(limits, 60, team=live["quota"])  # the new bucket is empty now
        await store.release(limits, taken)  # it took nothing from that bucket: gives nothing to it
        assert not (await store.try_acquire(limits, 60, team=live["quota"])).granted

    run(store, body)

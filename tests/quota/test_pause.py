"""The provider pause (TokenBuckets.pause_provider / lift_provider_pause / provider_pause and its backends):
a billing-exhausted or per-day-quota provider refuses every grant and lease with ProviderPaused, for every
worker, checked inside the grant's own atomic step (the Redis ACQUIRE / LEASE_ACQUIRE scripts).

Tests taking ``store`` run against both backends (conftest.py); ``clocked_store`` pins the expiry on a
fake clock; the shared-Redis tests use two clients, and one a second OS process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from gateway_engine.quota import PauseState, ProviderPaused
from gateway_engine.quota.redis_store import RedisQuotaStore
from tests.waiting import wait_until_async

from .conftest import make_limits, run

ROOT = Path(__file__).resolve().parents[2]


async def refused(call) -> ProviderPaused:
    with pytest.raises(ProviderPaused) as info:
        await call
    return info.value


def test_a_paused_provider_refuses_grants_and_leases_and_takes_nothing(store):
    limits, other = make_limits(rpm=600), make_limits(rpm=600)

    async def body():
        before = time.time()
        await store.pause_provider(limits.name, "provider_quota_exhausted", message="billing limit reached")
        err = await refused(store.try_acquire(limits, 10))
        assert (err.provider, err.reason, err.until_epoch, err.detail) == (
            limits.name, "provider_quota_exhausted", None, "billing limit reached"
        )  # fmt: skip
        assert "until an operator clears it" in str(err) and "billing limit reached" in str(err)
        await refused(store.acquire(limits, 10))
        await refused(store.try_lease(limits))
        state = await store.provider_pause(limits.name)
        assert isinstance(state, PauseState) and state.until_epoch is None
        assert (state.reason, state.message) == ("provider_quota_exhausted", "billing limit reached")
        assert before - 2 <= state.since_epoch <= time.time() + 2  # the store's clock (Redis: server TIME)
        snap = await store.snapshot(limits)
        assert snap.rpm_tokens_available == snap.rpm_capacity and snap.leases_in_flight == 0
        assert snap.observed_rpm == 0
        assert (await store.try_acquire(other, 10)).granted  # another provider is not paused
        assert await store.provider_pause(other.name) is None

    run(store, body)


def test_lift_ends_the_pause_and_reports_whether_one_held(store):
    limits = make_limits()

    async def body():
        assert await store.lift_provider_pause(limits.name) is False
        await store.pause_provider(limits.name, "per_day_quota", until_epoch=time.time() + 3600)
        await refused(store.acquire(limits, 1))
        assert await store.lift_provider_pause(limits.name) is True
        assert await store.provider_pause(limits.name) is None
        assert (await store.acquire(limits, 1)).tokens == 1
        lease = await store.try_lease(limits)
        assert lease is not None
        await store.release_lease(limits, lease)
        assert await store.lift_provider_pause(limits.name) is False

    run(store, body)


def test_a_pause_with_an_end_expires_by_itself(store):
    limits = make_limits()

    async def body():
        await store.pause_provider(limits.name, "per_day_quota", until_epoch=time.time() + 0.3)
        state = await store.provider_pause(limits.name)
        assert state is not None and state.until_epoch == pytest.approx(time.time() + 0.3, abs=0.3)
        await refused(store.try_acquire(limits))

        async def granted():
            try:
                return (await store.try_acquire(limits)).granted
            except ProviderPaused:
                return False

        await wait_until_async(granted, timeout=10, what="the pause to expire")
        assert await store.provider_pause(limits.name) is None
        assert await store.lift_provider_pause(limits.name) is False

    run(store, body)


def test_pause_expiry_is_exact_on_the_store_clock(clocked_store, clock):
    limits = make_limits()

    async def body():
        await clocked_store.pause_provider(limits.name, "per_day_quota", until_epoch=time.time() + 60)
        clock.advance(59.5)
        await refused(clocked_store.try_acquire(limits))
        await refused(clocked_store.try_lease(limits))
        clock.advance(1.0)
        assert (await clocked_store.try_acquire(limits)).granted
        assert await clocked_store.provider_pause(limits.name) is None

    asyncio.run(body())


def test_the_pause_survives_limit_changes_and_the_429_clear(store):
    limits = make_limits(rpm=600)
    changed = make_limits(rpm=60, tpm=1_000, name=limits.name)

    async def body():
        await store.pause_provider(limits.name, "provider_quota_exhausted")
        await store.penalize(limits, 1.0)
        await store.clear_pause(changed)  # the 429 pause is a different thing: it must not lift this
        await refused(store.acquire(changed, 5))
        await refused(store.try_lease(changed))
        assert (await store.provider_pause(limits.name)) is not None

    run(store, body)


def test_a_new_pause_never_shortens_a_longer_one(store):
    limits = make_limits()

    async def body():
        now = time.time()
        await store.pause_provider(limits.name, "per_day_quota", until_epoch=now + 100)
        await store.pause_provider(limits.name, "per_day_quota", until_epoch=now + 50)
        assert (await store.provider_pause(limits.name)).until_epoch == pytest.approx(now + 100)
        await store.pause_provider(limits.name, "provider_quota_exhausted", message="spend limit")
        held = await store.provider_pause(limits.name)
        assert (held.reason, held.until_epoch, held.message) == (
            "provider_quota_exhausted",
            None,
            "spend limit",
        )
        await store.pause_provider(limits.name, "per_day_quota", until_epoch=now + 500)
        assert (await store.provider_pause(limits.name)).reason == "provider_quota_exhausted"

    run(store, body)


def test_give_back_and_reconcile_still_work_while_paused(store):
    limits = make_limits(rpm=60, tpm=600, burst_seconds=10.0)  # 10 requests, 100 tokens

    async def body():
        res = await store.acquire(limits, 40)
        lease = await store.try_lease(limits)
        await store.pause_provider(limits.name, "provider_quota_exhausted")
        await store.release_lease(limits, lease)
        await store.release(limits, res)
        snap = await store.snapshot(limits)
        assert snap.tpm_tokens_available >= 99.9 and snap.leases_in_flight == 0
        await store.reconcile(limits, res, 70)  # settles (30 over the reservation) without raising
        assert (await store.snapshot(limits)).tpm_tokens_available < 100

    run(store, body)


def test_waiters_notice_a_pause_set_meanwhile_and_a_lift_wakes_them(store):
    limits = make_limits(rpm=600)

    async def body():
        await store.penalize(limits, 30.0)  # every acquire now waits ~30 s
        head = asyncio.create_task(store.acquire(limits, 1))
        behind = asyncio.create_task(store.acquire(limits, 1))
        await asyncio.sleep(0.1)
        assert not head.done() and not behind.done()
        await store.pause_provider(limits.name, "provider_quota_exhausted")
        for task in (head, behind):  # woken at once, not after the 30 s sleep
            with pytest.raises(ProviderPaused):
                await asyncio.wait_for(task, 10)
        await store.lift_provider_pause(limits.name)
        waiter = asyncio.create_task(store.acquire(limits, 1))
        await asyncio.sleep(0.05)
        await store.clear_pause(limits)
        await store.lift_provider_pause(limits.name)  # wakes the sleeper, which now finds room
        assert (await asyncio.wait_for(waiter, 10)).tokens == 1

    run(store, body)


def test_bad_pause_arguments_name_the_field(store):
    async def body():
        with pytest.raises(ValueError, match="reason"):
            await store.pause_provider("p", "")
        with pytest.raises(ValueError, match="until_epoch"):
            await store.pause_provider("p", "per_day_quota", until_epoch=float("inf"))
        assert await store.provider_pause("p") is None

    run(store, body)


def test_two_clients_of_one_redis_share_the_pause(redis_store):
    limits = make_limits(rpm=60, burst_seconds=1.0)  # capacity 1: the second acquire waits ~1 s
    other = RedisQuotaStore(settings.REDIS_URL, prefix=redis_store.prefix, global_max_in_flight=3)

    async def body():
        try:
            await redis_store.acquire(limits, 1)
            waiting = asyncio.create_task(redis_store.acquire(limits, 1))
            await asyncio.sleep(0.05)
            await other.pause_provider(limits.name, "per_day_quota", until_epoch=time.time() + 3600)
            with pytest.raises(ProviderPaused):  # noticed on its next try (after its ~1 s wait)
                await asyncio.wait_for(waiting, 10)
            await refused(redis_store.try_lease(limits))
            assert (await redis_store.provider_pause(limits.name)).reason == "per_day_quota"
            assert await redis_store.lift_provider_pause(limits.name) is True
            assert await other.provider_pause(limits.name) is None
            lease = await other.try_lease(limits)
            assert lease is not None
            await other.release_lease(limits, lease)
        finally:
            await other.aclose()

    run(redis_store, body)


def test_a_pause_set_by_another_process_refuses_this_one(redis_store):
    limits = make_limits()
    script = (
        "import asyncio, sys; from gateway_engine.quota.redis_store import RedisQuotaStore as S\n"
        "async def main():\n"
        "    s = S(sys.argv[1], prefix=sys.argv[2])\n"
        "    await s.pause_provider(sys.argv[3], 'provider_quota_exhausted', message='from the other process')\n"
        "    await s.aclose()\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, settings.REDIS_URL, redis_store.prefix, limits.name],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    async def body():
        err = await refused(redis_store.acquire(limits, 1))
        assert err.detail == "from the other process"
        await refused(redis_store.try_lease(limits))

    run(redis_store, body)


def test_the_local_view_refuses_wakes_a_retry_wait_and_refills_the_store():
    """hold_pauses (the durable record, as LimitsSource loads it): a grant is refused even though the
    store holds no pause, a wait_for_pause of that provider ends at once, refill_pauses writes it back."""
    import asyncio

    from gateway_engine.quota.local import LocalQuotaStore
    from gateway_engine.quota.types import PauseState, ProviderLimits, ProviderPaused

    async def scenario():
        store = LocalQuotaStore()
        limits = ProviderLimits(
            "p", rpm=600, tpm=100_000, burst_seconds=1, max_concurrency=4, timeout_seconds=30
        )
        waiter = asyncio.ensure_future(store.wait_for_pause("p", 60.0))
        await asyncio.sleep(0.01)
        store.hold_pauses({"p": PauseState("p", "billing", None, "out of credit")})
        assert await asyncio.wait_for(waiter, 5.0) is True  # woken, not after 60 s
        assert await store.provider_pause("p") is None
        with pytest.raises(ProviderPaused):
            await store.acquire(limits, 10)
        assert await store.refill_pauses() == 1
        assert (await store.provider_pause("p")).reason == "billing"
        store.hold_pauses({})
        await store.lift_provider_pause("p")
        assert (await store.acquire(limits, 10)).tokens == 10

    asyncio.run(scenario())

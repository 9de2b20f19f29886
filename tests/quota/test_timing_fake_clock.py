"""The bucket's timing rules exactly, on the in-process store with a fake clock: no sleeps, no margins.

The behavioural suite (test_behaviour.py) runs the same scenarios on both stores in real time with
bounds that hold on a loaded machine; the exact numbers are pinned here.
"""

from __future__ import annotations

import pytest

from gateway_engine.quota import LocalQuotaStore, Reservation
from tests.clock import FakeClock

from .conftest import make_limits, run


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(clock):
    return LocalQuotaStore(clock=clock, global_max_in_flight=3)


def test_burst_then_exact_wait(store, clock):
    limits = make_limits(rpm=120, burst_seconds=5.0)  # 2/s, capacity 10

    async def body():
        for _ in range(10):
            assert (await store.try_acquire(limits)).granted
        denied = await store.try_acquire(limits)
        assert not denied.granted and not denied.impossible
        assert denied.wait_ms == 500  # one token refills in exactly 500 ms
        clock.advance_ms(499)
        assert not (await store.try_acquire(limits)).granted
        clock.advance_ms(1)
        assert (await store.try_acquire(limits)).granted
        assert not (await store.try_acquire(limits)).granted

    run(store, body)


def test_both_buckets_or_neither(store, clock):
    limits = make_limits(rpm=60, tpm=600, burst_seconds=10.0)  # 10 requests, 100 tokens, 10 tokens/s

    async def body():
        assert (await store.try_acquire(limits, 80)).granted
        denied = await store.try_acquire(limits, 50)  # RPM has room, TPM does not
        assert not denied.granted and denied.wait_ms == 3_000  # 30 missing tokens at 10 tokens/s
        state = await store.snapshot(limits)
        assert state.rpm_tokens_available == 9  # the denied call did not take a request token
        assert state.tpm_tokens_available == 20
        clock.advance(3.0)
        assert (await store.try_acquire(limits, 50)).granted

    run(store, body)


def test_reconcile_refunds_and_charges_debt(store, clock):
    limits = make_limits(rpm=6000, tpm=600, burst_seconds=10.0)  # 100 tokens, 10 tokens/s

    async def body():
        res = await store.acquire(limits, 90)
        await store.reconcile(limits, res, 30)  # refund 60
        assert (await store.snapshot(limits)).tpm_tokens_available == 70
        res = await store.acquire(limits, 70)
        await store.reconcile(limits, res, 150)  # 80 over: debt
        assert (await store.snapshot(limits)).tpm_tokens_available == -80
        assert (await store.try_acquire(limits, 1)).wait_ms == 8_100  # 81 tokens at 10/s
        await store.reconcile(limits, Reservation(limits.name, 10_000), 0)  # never overfills
        assert (await store.snapshot(limits)).tpm_tokens_available == limits.tpm_capacity

    run(store, body)


def test_penalize_pauses_everyone_and_never_shortens(store, clock):
    limits = make_limits(rpm=6000)

    async def body():
        await store.penalize(limits, 1.0)
        assert (await store.try_acquire(limits)).wait_ms == 1000
        await store.penalize(limits, 0.1)  # shorter: ignored
        clock.advance(0.5)
        assert (await store.try_acquire(limits)).wait_ms == 500
        await store.penalize(limits, 0.3)  # ends before the pause in force: ignored
        clock.advance(0.499)
        assert not (await store.try_acquire(limits)).granted
        clock.advance(0.001)
        assert (await store.try_acquire(limits)).granted
        assert (await store.snapshot(limits)).paused_until_ms == 0

    run(store, body)


def test_refill_never_exceeds_capacity(store, clock):
    limits = make_limits(rpm=600, burst_seconds=1.0)  # 10/s, capacity 10

    async def body():
        assert (await store.try_acquire(limits)).granted
        clock.advance(3600)  # an hour idle refills to capacity, not beyond
        granted = 0
        for _ in range(20):
            granted += (await store.try_acquire(limits)).granted
        assert granted == 10

    run(store, body)


def test_a_lease_lives_exactly_its_ttl_unless_its_heartbeat_renews_it(store, clock):
    limits = make_limits(max_concurrency=1, timeout_seconds=0.4, lease_grace_seconds=0.6)  # TTL 1 s

    async def body():
        assert await store.lease_pool.try_take(limits, "ghost") == 0  # taken, then never renewed nor released
        assert await store.lease_pool.try_take(limits, "other") == 1000  # the slot frees in exactly the TTL
        clock.advance_ms(999)
        assert await store.lease_pool.try_take(limits, "other") == 1
        clock.advance_ms(1)
        assert await store.lease_pool.try_take(limits, "other") == 0  # the dead lease expired: slot taken
        clock.advance_ms(999)
        assert await store.lease_pool.refresh(limits, "other")  # a heartbeat within the TTL renews it...
        clock.advance_ms(999)
        assert await store.lease_pool.try_take(limits, "third") == 1  # ...for a whole TTL from the heartbeat
        clock.advance_ms(1)
        assert not await store.lease_pool.refresh(limits, "other")  # a heartbeat too late finds it gone
        assert await store.lease_pool.try_take(limits, "third") == 0

    run(store, body)

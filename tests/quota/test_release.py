"""release() and the non-waiting slot primitives (try_lease, wait_for_lease, try_global_slot), both backends."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import make_limits, run


def test_release_refunds_exactly(store):
    limits = make_limits(rpm=60, tpm=6_000, burst_seconds=10.0)  # capacity 10 requests, 1,000 tokens; 1 req/s

    async def body():
        for _ in range(4):
            await store.acquire(limits, 100)
        taken = await store.acquire(limits, 250)
        before = await store.snapshot(limits)
        assert before.rpm_tokens_available == pytest.approx(5.0, abs=0.05)
        assert before.tpm_tokens_available == pytest.approx(350.0, abs=6)
        await store.release(limits, taken)
        after = await store.snapshot(limits)
        refill_rpm = (after.rpm_tokens_available - before.rpm_tokens_available) - 1.0
        refill_tpm = (after.tpm_tokens_available - before.tpm_tokens_available) - 250.0
        # exactly 1 request and 250 tokens came back (plus the few ms of refill in between)
        assert 0 <= refill_rpm < 0.05, refill_rpm
        assert 0 <= refill_tpm < 6, refill_tpm
        assert after.observed_rpm == 4 and after.observed_tpm == 400  # the given-back grant is not counted

    run(store, body)


def test_release_never_exceeds_capacity(store):
    limits = make_limits(rpm=60, tpm=6_000, burst_seconds=10.0)

    async def body():
        res = await store.acquire(limits, 300)
        await store.release(limits, res)
        await store.release(limits, res)  # a second (wrong) release must not overfill the bucket
        state = await store.snapshot(limits)
        assert state.rpm_tokens_available == pytest.approx(limits.rpm_capacity)
        assert state.tpm_tokens_available == pytest.approx(limits.tpm_capacity)
        granted = 0
        while (await store.try_acquire(limits, 0)).granted:
            granted += 1
        assert granted == int(limits.rpm_capacity)  # 10, not 11 or 12

    run(store, body)


def test_try_lease_never_waits_and_peek_takes_nothing(store):
    limits = make_limits(max_concurrency=2, timeout_seconds=1.0, lease_grace_seconds=1.0)

    async def body():
        assert await store.lease_pool.peek(limits) == 0
        a = await store.try_lease(limits)
        b = await store.try_lease(limits)
        assert a is not None and b is not None
        # full: no wait, no lease (a waiting try_lease would block for good: nothing frees a lease here)
        assert await asyncio.wait_for(store.try_lease(limits), 5) is None
        hint = await store.lease_pool.peek(limits)
        assert 0 < hint <= 2_000
        assert (await store.snapshot(limits)).leases_in_flight == 2  # peeking took nothing

        waiter = asyncio.ensure_future(store.wait_for_lease(limits))
        for _ in range(20):  # let the waiter run as far as it can (order, not time)
            await asyncio.sleep(0)
        assert not waiter.done()
        await store.release_lease(limits, a)
        await asyncio.wait_for(waiter, 5)  # woken by the release in this process (5 s only bounds a hang)
        assert (await store.snapshot(limits)).leases_in_flight == 1  # waiting took nothing either
        c = await store.try_lease(limits)
        assert c is not None
        await store.release_lease(limits, b)
        await store.release_lease(limits, c)
        assert (await store.snapshot(limits)).leases_in_flight == 0

    run(store, body)


def test_try_global_slot_never_waits(store):  # the fixture's stores have global_max_in_flight=3
    async def body():
        slots = [await store.try_global_slot() for _ in range(3)]
        assert all(s is not None for s in slots) and store.global_in_flight == 3
        assert await store.try_global_slot() is None and store.global_in_flight == 3
        waiter = asyncio.ensure_future(store.wait_for_global_slot())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiter.done()
        await store.release_global_slot(slots[0])
        await store.release_global_slot(slots[0])  # idempotent
        await asyncio.wait_for(waiter, 5)
        assert store.global_in_flight == 2
        for s in slots[1:]:
            await store.release_global_slot(s)
        assert store.global_in_flight == 0

    run(store, body)

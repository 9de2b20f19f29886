"""Concurrency leases and in-flight slots (gateway_engine/quota/leases.py, slots.py and their backends):
provider leases with heartbeats and a TTL, the per-process in-flight cap, the waiting for either.

Every test taking ``store`` runs against the in-process store AND the Redis store (conftest.py); the
test taking ``clocked_store`` pins a lease's TTL exactly on the in-process store with a fake clock.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.waiting import wait_until_async

from .conftest import make_limits, run


def test_lease_caps_concurrency(store):
    limits = make_limits(max_concurrency=3)

    async def body():
        in_flight = peak = done = 0

        async def call():
            nonlocal in_flight, peak, done
            async with store.lease(limits):
                in_flight += 1
                peak = max(peak, in_flight)
                await asyncio.sleep(0.02)
                in_flight -= 1
            done += 1

        await asyncio.gather(*(call() for _ in range(20)))
        assert peak == 3 and done == 20
        assert (await store.snapshot(limits)).leases_in_flight == 0

    run(store, body)


def test_lease_released_on_error_and_cancellation(store):
    limits = make_limits(max_concurrency=1)

    async def body():
        with pytest.raises(RuntimeError):
            async with store.lease(limits):
                raise RuntimeError("provider exploded")
        entered = asyncio.Event()

        async def holder():
            async with store.lease(limits):
                entered.set()
                await asyncio.sleep(30)

        task = asyncio.create_task(holder())
        await entered.wait()
        assert (await store.snapshot(limits)).leases_in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(1.0):
            async with store.lease(limits):
                pass

    run(store, body)


def test_lease_heartbeat_outlives_ttl_and_dead_lease_expires(store):
    limits = make_limits(max_concurrency=1, timeout_seconds=0.4, lease_grace_seconds=0.6)  # TTL 1 s

    async def body():
        async with store.lease(limits) as lease:
            await asyncio.sleep(2.2)  # > 2 TTLs: only heartbeats keep it
            assert not lease.lost
            assert (await store.snapshot(limits)).leases_in_flight == 1
            assert await store.lease_pool.try_take(limits, "intruder") > 0
        # a lease whose holder vanished (never released, no heartbeat) frees itself after the TTL
        # (exactly the TTL: the fake-clock test below)
        assert await store.lease_pool.try_take(limits, "ghost") == 0
        assert await store.lease_pool.try_take(limits, "other") > 0
        await wait_until_async(
            lambda: lease_taken(store, limits, "other"), 30, what="the dead lease to expire"
        )

    run(store, body)


def test_global_slot_caps_in_flight(store):
    async def body():
        in_flight = peak = 0

        async def call():
            nonlocal in_flight, peak
            async with store.global_slot():
                in_flight += 1
                peak = max(peak, in_flight)
                await asyncio.sleep(0.01)
                in_flight -= 1

        await asyncio.gather(*(call() for _ in range(12)))
        assert peak == 3 == store.global_max_in_flight
        assert store.global_in_flight == 0

    run(store, body)


def test_global_slot_is_per_process_across_threads_and_loops(store):
    import threading

    in_flight = peak = 0
    lock = threading.Lock()

    async def call():
        nonlocal in_flight, peak
        async with store.global_slot():
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            with lock:
                in_flight -= 1

    async def many():
        await asyncio.gather(*(call() for _ in range(8)))

    threads = [threading.Thread(target=asyncio.run, args=(many(),)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert peak == 3 and store.global_in_flight == 0


def test_cancelled_while_waiting_for_a_lease_leaves_no_slot_behind(store):
    limits = make_limits(max_concurrency=2)

    async def body():
        async with store.lease(limits):
            waiters = [asyncio.create_task(_enter(store, limits)) for _ in range(5)]
            await asyncio.sleep(0.05)
            for _ in range(20):  # cancel at many different points of the wait loop
                for w in waiters:
                    w.cancel()
                await asyncio.gather(*waiters, return_exceptions=True)
                waiters = [asyncio.create_task(_enter(store, limits)) for _ in range(5)]
                await asyncio.sleep(random.uniform(0, 0.003))
            for w in waiters:
                w.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        # a waiter cancelled right after the store granted it gives the slot back in the background
        await wait_until_async(
            lambda: not store.lease_pool.background_releases, 30, what="the background releases"
        )
        assert (await store.snapshot(limits)).leases_in_flight == 0

    run(store, body)


async def _enter(store, limits):
    async with store.lease(limits):
        await asyncio.sleep(10)


async def lease_taken(store, limits, lease_id: str) -> bool:
    return await store.lease_pool.try_take(limits, lease_id) == 0


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


def test_a_lease_lives_exactly_its_ttl_unless_its_heartbeat_renews_it_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(max_concurrency=1, timeout_seconds=0.4, lease_grace_seconds=0.6)  # TTL 1 s

    async def body():
        assert (
            await clocked_store.lease_pool.try_take(limits, "ghost") == 0
        )  # taken, then never renewed nor released
        assert (
            await clocked_store.lease_pool.try_take(limits, "other") == 1000
        )  # the slot frees in exactly the TTL
        clock.advance_ms(999)
        assert await clocked_store.lease_pool.try_take(limits, "other") == 1
        clock.advance_ms(1)
        assert (
            await clocked_store.lease_pool.try_take(limits, "other") == 0
        )  # the dead lease expired: slot taken
        clock.advance_ms(999)
        assert await clocked_store.lease_pool.refresh(
            limits, "other"
        )  # a heartbeat within the TTL renews it...
        clock.advance_ms(999)
        assert (
            await clocked_store.lease_pool.try_take(limits, "third") == 1
        )  # ...for a whole TTL from the heartbeat
        clock.advance_ms(1)
        assert not await clocked_store.lease_pool.refresh(
            limits, "other"
        )  # a heartbeat too late finds it gone
        assert await clocked_store.lease_pool.try_take(limits, "third") == 0

    run(clocked_store, body)

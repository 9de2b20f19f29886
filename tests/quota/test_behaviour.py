"""Behavioural suite: every test runs against the in-process store AND the Redis store."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from gateway_engine.quota import QuotaImpossible, Reservation
from tests.waiting import wait_until_async

from .conftest import assert_within_rate, make_limits, run


def test_burst_then_exact_wait(store):
    limits = make_limits(rpm=120, burst_seconds=5.0)  # 2/s, capacity 10

    async def body():
        for _ in range(10):
            assert (await store.try_acquire(limits)).granted
        denied = await store.try_acquire(limits)
        assert not denied.granted and not denied.impossible
        assert 0 < denied.wait_ms <= 500  # one token refills in 500 ms (exact: test_timing_fake_clock.py)
        await asyncio.sleep(denied.wait_ms / 1000 + 0.002)
        assert (await store.try_acquire(limits)).granted

    run(store, body)


def test_both_buckets_or_neither(store):
    limits = make_limits(rpm=60, tpm=600, burst_seconds=10.0)  # 10 requests, 100 tokens, 10 tokens/s

    async def body():
        assert (await store.try_acquire(limits, 80)).granted
        denied = await store.try_acquire(limits, 50)  # RPM has room, TPM does not
        assert not denied.granted
        assert 0 < denied.wait_ms <= 3_000  # 30 missing tokens at 10 tokens/s (exact: fake-clock file)
        state = await store.snapshot(limits)
        assert 8.9 < state.rpm_tokens_available < 9.9  # the denied call did not take a request token
        assert 20 <= state.tpm_tokens_available < 29  # ≤ 0.9 s of refill
        assert state.observed_rpm == 1 and state.observed_tpm == 80

    run(store, body)


def test_impossible_request_fails_at_once(store):
    limits = make_limits(tpm=600, burst_seconds=2.0)  # capacity 20 tokens

    async def body():
        decision = await store.try_acquire(limits, 21)
        assert decision.impossible and not decision.granted
        started = time.monotonic()
        with pytest.raises(QuotaImpossible) as info:
            await store.acquire(limits, 21)
        assert time.monotonic() - started < 5  # at once, not after a (never-ending) wait
        assert "20" in str(info.value) and limits.name in str(info.value)
        assert (await store.acquire(limits, 20)) == Reservation(limits.name, 20)

    run(store, body)


def test_acquire_sleeps_until_granted(store):
    limits = make_limits(rpm=1200, burst_seconds=1.0)  # 20/s, capacity 20

    async def body():
        started = time.monotonic()
        for _ in range(26):
            await store.acquire(limits)
        elapsed = time.monotonic() - started
        # 20 from the burst, 6 more at 20/s need ~0.3 s; generous upper bound for a loaded machine
        assert 0.25 <= elapsed < 10  # lower bound exact; the upper one only catches a hang

    run(store, body)


def test_reconcile_refunds_and_charges_debt(store):
    limits = make_limits(rpm=6000, tpm=600, burst_seconds=10.0)  # 100 tokens, 10 tokens/s

    async def body():
        res = await store.acquire(limits, 90)
        await store.reconcile(limits, res, 30)  # refund 60
        state = await store.snapshot(limits)
        assert 69 <= state.tpm_tokens_available <= 79
        assert state.observed_tpm == 30
        res = await store.acquire(limits, 70)
        await store.reconcile(limits, res, 150)  # 80 over: debt
        state = await store.snapshot(limits)
        assert -81 <= state.tpm_tokens_available <= -72
        decision = await store.try_acquire(limits, 1)
        assert not decision.granted and decision.wait_ms >= 7_000  # ~81 tokens at 10/s
        # a refund never overfills the bucket
        await store.reconcile(limits, Reservation(limits.name, 10_000), 0)
        state = await store.snapshot(limits)
        assert state.tpm_tokens_available <= limits.tpm_capacity

    run(store, body)


def test_penalize_pauses_everyone_and_never_shortens(store):
    limits = make_limits(rpm=6000)

    async def body():
        await store.penalize(limits, 1.0)
        decision = await store.try_acquire(limits)
        assert not decision.granted and 0 < decision.wait_ms <= 1000
        until = (await store.snapshot(limits)).paused_until_ms
        assert until > 0
        await store.penalize(limits, 0.1)  # shorter: ignored
        assert not (await store.try_acquire(limits)).granted
        assert (await store.snapshot(limits)).paused_until_ms >= until - 5
        await store.penalize(limits, 0.3)
        # the pause ends (its exact length: test_timing_fake_clock.py)
        await wait_until_async(lambda: granted(store, limits), 30, what="the pause to end")
        assert (await store.snapshot(limits)).paused_until_ms == 0

    run(store, body)


def test_lowered_rpm_clamps_bucket_at_once(store):
    high = make_limits(rpm=6000, burst_seconds=1.0)  # capacity 100
    low = make_limits(name=high.name, rpm=120, burst_seconds=1.0)  # capacity 2

    async def body():
        assert (await store.try_acquire(high)).granted
        granted = 0
        for _ in range(10):
            granted += (await store.try_acquire(low)).granted
        assert granted == 2
        state = await store.snapshot(low)
        assert state.rpm_tokens_available < 1 and state.configured_rpm == 120

    run(store, body)


def test_concurrent_callers_never_exceed_buckets(store):
    limits = make_limits(rpm=3000, tpm=6000, burst_seconds=1.0)  # 50 req cap, 100 tokens cap, 100 tok/s

    async def body():
        grants: list[tuple[float, int]] = []
        rng = random.Random(7)
        deadline = time.monotonic() + 1.2

        async def caller():
            while time.monotonic() < deadline:
                tokens = rng.randint(1, 40)
                decision = await store.try_acquire(limits, tokens)
                if decision.granted:
                    grants.append((decision.now_ms, tokens))
                else:
                    await asyncio.sleep(decision.wait_ms / 1000)

        await asyncio.gather(*(caller() for _ in range(8)))
        assert sum(t for _, t in grants) >= 150  # it really was saturated: burst + refill
        assert_within_rate(grants, limits.tpm_per_ms, limits.tpm_capacity, "tpm")
        assert_within_rate([(t, 1) for t, _ in grants], limits.rpm_per_ms, limits.rpm_capacity, "rpm")

    run(store, body)


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
        # (exactly the TTL: test_timing_fake_clock.py)
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


def test_store_survives_successive_event_loops(store):
    """Celery tasks call asyncio.run per chunk: the same store must work on each new loop."""
    limits = make_limits(rpm=6000)
    for _ in range(3):
        assert run(store, store.try_acquire, limits).granted
    assert asyncio.run(store.snapshot(limits)).observed_rpm == 3  # even without aclose()


def test_snapshot_reports_configuration_and_observed(store):
    limits = make_limits(rpm=60, tpm=6_000, burst_seconds=10.0, max_concurrency=5)

    async def body():
        for n in (10, 20, 30):
            await store.acquire(limits, n)
        async with store.lease(limits):
            state = await store.snapshot(limits)
        assert state.provider == limits.name
        assert (state.rpm_capacity, state.tpm_capacity) == (10.0, 1000.0)
        assert (state.configured_rpm, state.configured_tpm, state.max_concurrency) == (60, 6_000, 5)
        assert (state.observed_rpm, state.observed_tpm) == (3, 60)
        assert state.leases_in_flight == 1 and state.wait_ms == 0 and state.paused_until_ms == 0
        assert 6.9 < state.rpm_tokens_available < 7.9

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


async def granted(store, limits) -> bool:
    return (await store.try_acquire(limits)).granted


async def lease_taken(store, limits, lease_id: str) -> bool:
    return await store.lease_pool.try_take(limits, lease_id) == 0


def count_try_acquire(store) -> list[int]:
    """Count the store's try_acquire calls (its buckets') from now on: [calls so far]."""
    calls = [0]
    original = store.buckets.try_acquire

    async def counting(*args, **kwargs):
        calls[0] += 1
        return await original(*args, **kwargs)

    store.buckets.try_acquire = counting
    return calls


def queued(store, limits) -> int:
    """How many callers of this event loop wait in line for the provider's buckets."""
    return len(store.buckets.queues.waiting(asyncio.get_running_loop(), limits.name) or ())


def test_acquire_waits_without_polling(store):
    limits = make_limits(rpm=600, burst_seconds=1.0)  # 10 at once, then one per 100 ms
    calls = count_try_acquire(store)

    async def body():
        for _ in range(15):
            await store.acquire(limits)

    run(store, body)
    # 10 immediate grants + 5 that each wait once; one retry of slack per wait for timer rounding
    assert 15 <= calls[0] <= 10 + 5 * 2, calls


def test_waiters_of_one_process_are_served_in_order(store):
    """A large request is not overtaken by smaller ones that asked after it; one caller polls."""
    limits = make_limits(rpm=6000, tpm=6000, burst_seconds=1.0)  # 100 tokens, 100 tokens/s
    order: list[str] = []
    calls = count_try_acquire(store)

    async def take(label: str, tokens: int):
        await store.acquire(limits, tokens)
        order.append(label)

    async def body():
        await store.acquire(limits, 100)  # drain the TPM bucket
        big = asyncio.create_task(take("big", 90))
        await wait_until_async(lambda: queued(store, limits) == 1, 30, what="the big request to queue")
        smalls = [asyncio.create_task(take(f"small{i}", 5)) for i in range(10)]
        await asyncio.gather(big, *smalls)

    run(store, body)
    assert order[0] == "big", order
    assert order[1:] == [f"small{i}" for i in range(10)]
    assert calls[0] <= 1 + 2 * 11 + 3, calls  # about one store call per grant (+ a retry each for rounding)


def test_queued_waiter_cancellation_and_deadline(store):
    limits = make_limits(rpm=60, burst_seconds=1.0)  # 1 request per second

    async def body():
        await store.acquire(limits)
        head = asyncio.create_task(store.acquire(limits))
        await wait_until_async(lambda: queued(store, limits) == 1, 30, what="the head to queue")
        second = asyncio.create_task(store.acquire(limits))
        await wait_until_async(lambda: queued(store, limits) == 2, 30, what="the second to queue")
        second.cancel()
        with pytest.raises(TimeoutError):
            await store.acquire(limits, max_wait_seconds=0.1)  # third in line, ~2 s away
        head.cancel()
        await asyncio.gather(head, second, return_exceptions=True)
        assert queued(store, limits) == 0
        # the line is empty again: a new caller is served as soon as the bucket allows (≤ 1 s)
        async with asyncio.timeout(10):  # served, not queued behind the cancelled waiters
            await store.acquire(limits)

    run(store, body)

"""Token buckets (gateway_engine/quota/buckets.py and its backends): RPM/TPM and the per-(provider, team)
share bucket, acquire / release / reconcile / penalize and the waiting for a grant.

Every test taking ``store`` runs against the in-process store AND the Redis store (conftest.py), in
real time with bounds that hold on a loaded machine. The tests taking ``clocked_store`` pin the exact
numbers on the in-process store with a fake clock (no sleeps, no margins): the Redis store's clock is
the server's TIME, which a test cannot step.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from gateway_engine.quota import QuotaImpossible, Reservation, TeamQuota
from providers.adapters import provider_limits
from tests.waiting import wait_until_async

from .conftest import assert_within_rate, make_limits, run


def test_burst_then_exact_wait(store):
    limits = make_limits(rpm=120, burst_seconds=5.0)  # 2/s, capacity 10

    async def body():
        for _ in range(10):
            assert (await store.try_acquire(limits)).granted
        denied = await store.try_acquire(limits)
        assert not denied.granted and not denied.impossible
        assert 0 < denied.wait_ms <= 500  # one token refills in 500 ms (exact: the fake-clock test below)
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
        # the pause ends (its exact length: the fake-clock test below)
        await wait_until_async(lambda: granted(store, limits), 30, what="the pause to end")
        assert (await store.snapshot(limits)).paused_until_ms == 0

    run(store, body)


async def granted(store, limits) -> bool:
    return (await store.try_acquire(limits)).granted


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


def test_share_cap_limits_a_team_to_its_share(store):
    base = make_limits(rpm=600, burst_seconds=10.0)  # 10/s, capacity 100
    capped = TeamQuota("t1", share=0.25)  # 2.5/s, capacity 25
    other = TeamQuota("t2")

    async def body():
        granted = 0
        for _ in range(60):
            granted += (await store.try_acquire(base, team=capped)).granted
        assert granted == 25  # the team's burst, although the provider bucket had 100
        denied = await store.try_acquire(base, team=capped)
        assert not denied.granted and 200 <= denied.wait_ms <= 400  # one team token refills in 400 ms
        # the provider's own buckets gave exactly 25 away: another team still gets the rest (plus what
        # refilled meanwhile at 10/s)
        others = 0
        for _ in range(100):
            others += (await store.try_acquire(base, team=other)).granted
        assert 75 <= others <= 80

    run(store, body)


def test_share_cap_holds_under_concurrency_and_releases_give_back(store):
    limits, team = make_limits(rpm=6000, burst_seconds=0.5), TeamQuota("t1", share=0.2)  # 20/s, capacity 10

    async def body():
        grants: list[tuple[float, int]] = []
        deadline = time.monotonic() + 1.0

        async def caller():
            while time.monotonic() < deadline:
                decision = await store.try_acquire(limits, team=team)
                if decision.granted:
                    grants.append((decision.now_ms, 1))
                else:
                    await asyncio.sleep(decision.wait_ms / 1000 * random.uniform(1, 1.2))

        await asyncio.gather(*(caller() for _ in range(6)))
        assert len(grants) >= 20
        assert_within_rate(grants, *team.share_rate(limits), "team rpm")

        fresh, t9 = make_limits(rpm=600, burst_seconds=1.0), TeamQuota("t9", share=0.2)  # team capacity 2
        res = await store.acquire(fresh, team=t9)
        await store.acquire(fresh, team=t9)
        assert not (await store.try_acquire(fresh, team=t9)).granted
        await store.release(fresh, res)  # gives back the team token too
        assert (await store.try_acquire(fresh, team=t9)).granted

    run(store, body)


def test_margin_takes_from_burst_not_from_rate():
    plain = make_limits(rpm=600, tpm=60_000, burst_seconds=5.0)
    margin = make_limits(rpm=600, tpm=60_000, burst_seconds=5.0)
    margin = type(margin)(**{**margin.__dict__, "margin_seconds": 0.5})
    assert plain.rpm_capacity == 50 and margin.rpm_capacity == 45
    assert margin.tpm_capacity == 4_500
    assert margin.rpm_per_ms == plain.rpm_per_ms and margin.tpm_per_ms == plain.tpm_per_ms


def test_margin_comes_from_settings_and_is_at_most_half_the_burst(settings):
    from types import SimpleNamespace

    row = SimpleNamespace(
        name="p",
        rpm=600,
        tpm=6000,
        burst_seconds=2.0,
        max_concurrency=1,
        timeout_seconds=5,
        itpm=None,
        otpm=None,
        kind="openai",
        adaptive=True,
    )
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 0.25
    limits = provider_limits(row)
    assert limits.margin_seconds == 0.25 and limits.rpm_capacity == 17.5 and limits.tpm_capacity == 175
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 5.0
    assert provider_limits(row).margin_seconds == 1.0  # half the burst
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 0.0
    assert provider_limits(row).rpm_capacity == 20
    # a team capped at 0.1 of 600 rpm: 1/s, burst (2 − 0.25) s → 1.75; never below one request
    per_ms, capacity = TeamQuota("t", share=0.1).share_rate(provider_limits(row, margin_seconds=0.25))
    assert per_ms == pytest.approx(1 / 1000) and capacity == 1.75
    assert TeamQuota("t", share=0.01).share_rate(provider_limits(row))[1] == 1.0
    assert (
        TeamQuota("t", share=None).share_capped is False and TeamQuota("t", share=1.0).share_capped is False
    )


def test_burst_then_exact_wait_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(rpm=120, burst_seconds=5.0)  # 2/s, capacity 10

    async def body():
        for _ in range(10):
            assert (await clocked_store.try_acquire(limits)).granted
        denied = await clocked_store.try_acquire(limits)
        assert not denied.granted and not denied.impossible
        assert denied.wait_ms == 500  # one token refills in exactly 500 ms
        clock.advance_ms(499)
        assert not (await clocked_store.try_acquire(limits)).granted
        clock.advance_ms(1)
        assert (await clocked_store.try_acquire(limits)).granted
        assert not (await clocked_store.try_acquire(limits)).granted

    run(clocked_store, body)


def test_both_buckets_or_neither_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(rpm=60, tpm=600, burst_seconds=10.0)  # 10 requests, 100 tokens, 10 tokens/s

    async def body():
        assert (await clocked_store.try_acquire(limits, 80)).granted
        denied = await clocked_store.try_acquire(limits, 50)  # RPM has room, TPM does not
        assert not denied.granted and denied.wait_ms == 3_000  # 30 missing tokens at 10 tokens/s
        state = await clocked_store.snapshot(limits)
        assert state.rpm_tokens_available == 9  # the denied call did not take a request token
        assert state.tpm_tokens_available == 20
        clock.advance(3.0)
        assert (await clocked_store.try_acquire(limits, 50)).granted

    run(clocked_store, body)


def test_reconcile_refunds_and_charges_debt_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(rpm=6000, tpm=600, burst_seconds=10.0)  # 100 tokens, 10 tokens/s

    async def body():
        res = await clocked_store.acquire(limits, 90)
        await clocked_store.reconcile(limits, res, 30)  # refund 60
        assert (await clocked_store.snapshot(limits)).tpm_tokens_available == 70
        res = await clocked_store.acquire(limits, 70)
        await clocked_store.reconcile(limits, res, 150)  # 80 over: debt
        assert (await clocked_store.snapshot(limits)).tpm_tokens_available == -80
        assert (await clocked_store.try_acquire(limits, 1)).wait_ms == 8_100  # 81 tokens at 10/s
        await clocked_store.reconcile(limits, Reservation(limits.name, 10_000), 0)  # never overfills
        assert (await clocked_store.snapshot(limits)).tpm_tokens_available == limits.tpm_capacity

    run(clocked_store, body)


def test_penalize_pauses_everyone_and_never_shortens_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(rpm=6000)

    async def body():
        await clocked_store.penalize(limits, 1.0)
        assert (await clocked_store.try_acquire(limits)).wait_ms == 1000
        await clocked_store.penalize(limits, 0.1)  # shorter: ignored
        clock.advance(0.5)
        assert (await clocked_store.try_acquire(limits)).wait_ms == 500
        await clocked_store.penalize(limits, 0.3)  # ends before the pause in force: ignored
        clock.advance(0.499)
        assert not (await clocked_store.try_acquire(limits)).granted
        clock.advance(0.001)
        assert (await clocked_store.try_acquire(limits)).granted
        assert (await clocked_store.snapshot(limits)).paused_until_ms == 0

    run(clocked_store, body)


def test_refill_never_exceeds_capacity_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(rpm=600, burst_seconds=1.0)  # 10/s, capacity 10

    async def body():
        assert (await clocked_store.try_acquire(limits)).granted
        clock.advance(3600)  # an hour idle refills to capacity, not beyond
        granted = 0
        for _ in range(20):
            granted += (await clocked_store.try_acquire(limits)).granted
        assert granted == 10

    run(clocked_store, body)

"""ITPM / OTPM buckets (ProviderLimits.itpm / .otpm; token_ask.py and both backends): input and output
tokens per minute taken with RPM, TPM and the team share in one atomic grant, given back, reconciled to
the reported usage, shown by snapshot, and live across a limits change.

Tests taking ``store`` run against both backends (real time, bounds that hold on a loaded machine);
``clocked_store`` pins the exact waits on a fake clock.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

import pytest

from gateway_engine.quota import QuotaImpossible
from gateway_engine.quota.team_quota import TeamQuota

from .conftest import assert_within_rate, make_limits, run

# 600 s bursts and slow refills (ITPM 10 tokens/min, OTPM 1/min): real-time drift stays far below 1 token
SLOW = {"rpm": 60, "tpm": 60_000, "burst_seconds": 600.0, "itpm": 10, "otpm": 1}  # caps 100 / 10


def test_one_grant_takes_from_every_bucket_or_from_none(store):
    limits = make_limits(**SLOW)

    async def body():
        res = await store.acquire(limits, 50, input_tokens=40, output_tokens=8)
        assert (res.tokens, res.input_tokens, res.output_tokens) == (50, 40, 8)
        snap = await store.snapshot(limits)
        assert (snap.configured_itpm, snap.configured_otpm) == (10, 1)
        assert (snap.itpm_capacity, snap.otpm_capacity) == (100.0, 10.0)
        assert snap.itpm_tokens_available == pytest.approx(60, abs=1)
        assert snap.otpm_tokens_available == pytest.approx(2, abs=0.2)
        denied = await store.try_acquire(limits, 10, 5, 5)  # only OTPM is short (2 of 5)
        assert not denied.granted and not denied.impossible
        assert 0 < denied.wait_ms <= 180_000  # 3 tokens at 1/min (exact: the fake-clock test)
        after = await store.snapshot(limits)  # the denied call took nothing anywhere
        assert after.rpm_tokens_available == pytest.approx(snap.rpm_tokens_available, abs=0.2)
        assert after.tpm_tokens_available == pytest.approx(snap.tpm_tokens_available, abs=100)
        assert after.itpm_tokens_available == pytest.approx(snap.itpm_tokens_available, abs=1)
        assert after.observed_rpm == 1 and after.observed_tpm == 50

    run(store, body)


def test_a_request_no_itpm_or_otpm_bucket_can_hold_fails_naming_it(store):
    limits = make_limits(**SLOW)

    async def body():
        with pytest.raises(QuotaImpossible) as info:
            await store.acquire(limits, 200, input_tokens=101, output_tokens=5)
        assert info.value.bucket == "ITPM" and "101 input tokens" in str(info.value)
        assert "ITPM bucket holds at most 100" in str(info.value)
        with pytest.raises(QuotaImpossible) as info:
            await store.acquire(limits, 200, input_tokens=50, output_tokens=11)
        assert info.value.bucket == "OTPM" and "OTPM bucket holds at most 10" in str(info.value)
        assert (await store.try_acquire(limits, 20, 0, 11)).impossible
        snap = await store.snapshot(limits)
        assert snap.observed_rpm == 0 and snap.itpm_tokens_available == 100

    run(store, body)


def test_without_itpm_and_otpm_the_split_takes_nothing_extra(store):
    limits = make_limits(rpm=600, tpm=6_000, burst_seconds=1.0)  # TPM cap 100

    async def body():
        res = await store.acquire(limits, 90, input_tokens=10_000, output_tokens=10_000)
        assert (res.input_tokens, res.output_tokens) == (0, 0)  # no such buckets: nothing recorded
        snap = await store.snapshot(limits)
        assert (snap.configured_itpm, snap.itpm_capacity, snap.otpm_capacity) == (0, 0.0, 0.0)
        await store.reconcile(limits, res, 90, actual_input=5_000, actual_output=5_000)

    run(store, body)


def test_an_unsplit_estimate_reserves_the_whole_from_each(store):
    limits = make_limits(**SLOW)

    async def body():
        res = await store.acquire(limits, 9)  # the caller gave no split: an upper bound on each part
        assert (res.input_tokens, res.output_tokens) == (9, 9)
        with pytest.raises(QuotaImpossible) as info:
            await store.acquire(limits, 11)
        assert info.value.bucket == "OTPM"

    run(store, body)


def test_release_gives_every_bucket_back_and_reconcile_settles_each(store):
    limits = make_limits(**SLOW)

    async def body():
        res = await store.acquire(limits, 60, input_tokens=50, output_tokens=10)
        await store.release(limits, res)
        snap = await store.snapshot(limits)
        assert (snap.itpm_tokens_available, snap.otpm_tokens_available) == (100, 10)  # clamped: full
        res = await store.acquire(limits, 60, input_tokens=50, output_tokens=10)
        # the provider read 20 input tokens (refund 30) and wrote 4 (refund 6): each bucket to its part
        await store.reconcile(limits, res, 24, actual_input=20, actual_output=4)
        snap = await store.snapshot(limits)
        assert snap.itpm_tokens_available == pytest.approx(80, abs=1)
        assert snap.otpm_tokens_available == pytest.approx(6, abs=0.2)
        res = await store.acquire(limits, 10, input_tokens=5, output_tokens=5)  # OTPM 6 -> 1
        await store.reconcile(limits, res, 10, actual_input=None, actual_output=12)  # 7 over: debt
        snap = await store.snapshot(limits)
        assert snap.itpm_tokens_available == pytest.approx(75, abs=1)  # None: ITPM left as reserved
        assert snap.otpm_tokens_available == pytest.approx(-6, abs=0.2)
        assert snap.wait_ms > 6 * 60_000  # 7 tokens at 1/min before a 1-token request fits

    run(store, body)


def test_the_itpm_bucket_honours_a_team_share_grant_atomically(store):
    limits, team = make_limits(**SLOW), TeamQuota("t", share=0.5)

    async def body():
        await store.acquire(limits, 10, input_tokens=95, output_tokens=1, team=team)
        denied = await store.try_acquire(limits, 10, 10, 1, team=team)  # ITPM short: the team token stays
        assert not denied.granted
        for _ in range(5):  # the team's share bucket (cap 50) still has its tokens
            assert (await store.try_acquire(limits, 1, 0, 0, team=team)).granted

    run(store, body)


def test_concurrent_grants_never_exceed_the_otpm_bucket(store):
    limits = make_limits(rpm=60_000, tpm=6_000_000, burst_seconds=1.0, itpm=60_000, otpm=6_000)

    async def body():
        grants: list[tuple[float, int, int]] = []
        rng = random.Random(11)
        deadline = time.monotonic() + 1.0

        async def caller():
            while time.monotonic() < deadline:
                inp, out = rng.randint(1, 300), rng.randint(1, 40)
                decision = await store.try_acquire(limits, inp + out, inp, out)
                if decision.granted:
                    grants.append((decision.now_ms, inp, out))
                else:
                    await asyncio.sleep(decision.wait_ms / 1000)

        await asyncio.gather(*(caller() for _ in range(8)))
        assert sum(o for _, _, o in grants) >= 150  # OTPM really was the limit: burst + refill
        assert_within_rate([(t, o) for t, _, o in grants], limits.otpm_per_ms, limits.otpm_capacity, "otpm")
        assert_within_rate([(t, i) for t, i, _ in grants], limits.itpm_per_ms, limits.itpm_capacity, "itpm")

    run(store, body)


def test_a_limits_change_applies_to_itpm_and_otpm_at_once(store):
    limits = make_limits(**SLOW)
    unset = replace(limits, itpm=0, otpm=0)
    lowered = replace(limits, otpm=1, burst_seconds=300.0)  # OTPM capacity 5 (ITPM 50)

    async def body():
        await store.acquire(limits, 100, input_tokens=90, output_tokens=9)
        with pytest.raises(QuotaImpossible):  # the lowered capacity applies on the very next call
            await store.acquire(lowered, 6, input_tokens=0, output_tokens=6)
        assert (await store.snapshot(lowered)).otpm_tokens_available < 1.5
        assert (await store.try_acquire(unset, 10, 10, 10)).granted  # unset: no ITPM / OTPM wait
        snap = await store.snapshot(limits)  # set again: the buckets start full, not from a stale level
        assert (snap.itpm_tokens_available, snap.otpm_tokens_available) == (100, 10)

    run(store, body)


def test_a_waiter_asks_with_the_live_itpm(store):
    limits = make_limits(rpm=600, tpm=600_000, burst_seconds=1.0, itpm=600)  # ITPM cap 10, 10 tokens/s
    live = {"limits": limits}

    async def body():
        await store.acquire(limits, 10, input_tokens=10, output_tokens=0)
        waiter = asyncio.create_task(
            store.acquire(limits, 10, input_tokens=10, current=lambda: live["limits"])
        )  # needs ~1 s of refill at the old rate
        await asyncio.sleep(0.05)
        live["limits"] = replace(limits, itpm=600_000, burst_seconds=1.0)  # 10 000 tokens/s
        res = await asyncio.wait_for(waiter, 10)
        assert res.input_tokens == 10

    run(store, body)


# ---- exact numbers on a fake clock -------------------------------------------------------------------
def test_the_wait_is_the_longest_over_the_buckets_on_a_fake_clock(clocked_store, clock):
    limits = make_limits(rpm=60_000, tpm=6_000_000, burst_seconds=1.0, itpm=6_000, otpm=600)
    # caps: ITPM 100 (0.1/ms), OTPM 10 (0.01/ms)

    async def body():
        assert (await clocked_store.try_acquire(limits, 100, 90, 8)).granted
        denied = await clocked_store.try_acquire(limits, 100, 40, 4)  # ITPM 30 short, OTPM 2 short
        assert denied.wait_ms == 300  # ITPM: 30 / 0.1 per ms; OTPM alone would be 200 ms
        clock.advance_ms(299)
        assert not (await clocked_store.try_acquire(limits, 100, 40, 4)).granted
        clock.advance_ms(1)
        assert (await clocked_store.try_acquire(limits, 100, 40, 4)).granted
        denied = await clocked_store.try_acquire(limits, 1, 0, 10)  # OTPM at 1 + 0.0 -> 9 short
        assert denied.wait_ms == 900
        res = await clocked_store.acquire(limits, 1, input_tokens=0, output_tokens=0)
        await clocked_store.reconcile(limits, res, 1, actual_input=0, actual_output=8)  # 8 over
        snap = await clocked_store.snapshot(limits)
        assert snap.otpm_tokens_available == pytest.approx(-7)
        assert snap.wait_ms == 800  # until OTPM holds 1 again
        await clocked_store.reconcile(limits, res, 1, actual_input=0, actual_output=10**12)
        assert (await clocked_store.snapshot(limits)).otpm_tokens_available == pytest.approx(-17)  # clamped

    asyncio.run(body())

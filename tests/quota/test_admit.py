"""The bucket grant and the provider's concurrency lease in one atomic step (store.admit: lua.py ADMIT,
local_buckets.py): both are taken, or — every lease held — neither, so a busy lease never costs a token
taken and given back; a short bucket takes no lease; a paused provider takes nothing; the team's buckets,
ITPM / OTPM and the lease heartbeat work as with the separate steps.

Every test taking ``store`` runs against the in-process store AND the Redis store (conftest.py).
"""

from __future__ import annotations

import asyncio

import pytest

from gateway_engine.quota import LeaseBusy, ProviderPaused, TeamQuota
from gateway_engine.quota.types import SettleOutcome

from .conftest import make_limits, run


async def done(store, limits, granted, *, give_back: bool = False) -> None:
    """The send is over: the in-flight slot and the lease go back (and the grant, if not used)."""
    reservation, lease, slot = granted
    await store.release_global_slot(slot)
    await store.release_lease(limits, lease)
    if give_back:
        await store.release(limits, reservation)


async def levels(store, limits) -> tuple[float, float, int, int]:
    """RPM tokens, TPM tokens, leases in flight, requests granted in the last minute."""
    snap = await store.snapshot(limits)
    return snap.rpm_tokens_available, snap.tpm_tokens_available, snap.leases_in_flight, snap.observed_rpm


def test_admit_takes_the_grant_and_the_lease_together(store):
    limits = make_limits(rpm=600, tpm=60_000, max_concurrency=2)  # 10 requests, 1,000 tokens

    async def body():
        reservation, lease, slot = admitted = await store.admit(limits, 100)
        assert (reservation.provider, reservation.tokens, lease.provider) == (limits.name, 100, limits.name)
        assert slot is not None and store.global_in_flight == 1  # this process's slot comes with them
        rpm, tpm, leases, granted = await levels(store, limits)
        assert rpm == pytest.approx(9, abs=0.05) and tpm == pytest.approx(900, abs=5)
        assert (leases, granted) == (1, 1)
        await done(store, limits, admitted, give_back=True)
        rpm, tpm, leases, granted = await levels(store, limits)
        assert rpm == pytest.approx(10, abs=0.05) and (leases, granted) == (0, 0)
        assert store.global_in_flight == 0

    run(store, body)


def test_a_busy_lease_takes_nothing(store):
    limits = make_limits(rpm=600, tpm=60_000, max_concurrency=1)

    async def body():
        held = await store.try_lease(limits)  # another worker's call in flight
        assert held is not None
        with pytest.raises(LeaseBusy) as busy:
            await store.admit(limits, 100)
        assert busy.value.provider == limits.name and busy.value.wait_ms > 0
        rpm, tpm, leases, granted = await levels(store, limits)
        assert rpm == pytest.approx(10, abs=0.05) and tpm == pytest.approx(1000, abs=5)
        assert (leases, granted) == (1, 0)  # no token taken, so none to give back
        assert store.global_in_flight == 0  # nor this process's slot
        await store.release_lease(limits, held)
        admitted = await store.admit(limits, 100)  # free again: both at once
        assert (await levels(store, limits))[2:] == (1, 1)
        await done(store, limits, admitted, give_back=True)

    run(store, body)


def test_a_short_bucket_takes_no_lease_while_it_waits(store):
    limits = make_limits(rpm=60, tpm=60_000, burst_seconds=2.0, max_concurrency=4)  # 2 requests, 1/s

    async def body():
        first = [await store.admit(limits, 1) for _ in range(2)]
        waiter = asyncio.create_task(store.admit(limits, 1))
        await asyncio.sleep(0.3)  # the third waits for the RPM bucket: it holds no lease (nor slot) meanwhile
        assert not waiter.done() and (await levels(store, limits))[2] == 2 and store.global_in_flight == 2
        third = await asyncio.wait_for(waiter, 5)  # granted at the refill, with its lease
        assert (await levels(store, limits))[2] == 3
        for admitted in [*first, third]:
            await done(store, limits, admitted)
        cancelled = asyncio.create_task(store.admit(limits, 1))  # the bucket is empty again
        await asyncio.sleep(0.1)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await asyncio.sleep(0.05)  # a cancelled ask's possible lease goes back in the background
        assert (await levels(store, limits))[2] == 0 and store.global_in_flight == 0

    run(store, body)


def test_a_full_process_waits_for_its_slot_before_asking_and_takes_nothing_meanwhile(store):
    limits = make_limits(rpm=600, tpm=60_000, max_concurrency=8)

    async def body():
        taken = [await store.try_global_slot() for _ in range(3)]  # the fixture's process cap: 3
        assert all(taken)
        asking = asyncio.create_task(store.admit(limits, 100))
        await asyncio.sleep(0.2)
        assert not asking.done()
        rpm, tpm, leases, granted = await levels(store, limits)
        assert rpm == pytest.approx(10, abs=0.05) and (leases, granted) == (0, 0)  # nothing taken
        await store.release_global_slot(taken.pop())
        admitted = await asyncio.wait_for(asking, 5)  # woken by the release here: then all at once
        assert (await levels(store, limits))[2:] == (1, 1) and store.global_in_flight == 3
        await done(store, limits, admitted, give_back=True)
        for slot in taken:
            await store.release_global_slot(slot)

    run(store, body)


def test_a_paused_provider_admits_nothing(store):
    limits = make_limits(rpm=600, max_concurrency=2)

    async def body():
        await store.pause_provider(limits.name, "per_day_quota", message="daily cap")
        with pytest.raises(ProviderPaused):
            await store.admit(limits, 10)
        rpm, _, leases, granted = await levels(store, limits)
        assert rpm == pytest.approx(10, abs=0.05) and (leases, granted) == (0, 0)

    run(store, body)


def test_the_team_buckets_grant_with_the_lease_or_not_at_all(store):
    limits = make_limits(rpm=60_000, tpm=6_000_000, max_concurrency=1)
    team = TeamQuota("acme", rpm=60, tpm=6_000, burst_seconds=10.0)  # 10 requests, 1,000 tokens

    async def body():
        admitted = await store.admit(limits, 100, team=team)
        with pytest.raises(LeaseBusy):  # the lease is held: the team's buckets are not touched either
            await store.admit(limits, 100, team=team)
        state = await store.team_snapshot(team)
        assert state.requests_last_minute == 1 and state.tokens_last_minute == 100
        assert 899 <= state.tpm_available <= 910
        await done(store, limits, admitted, give_back=True)
        assert (await store.team_snapshot(team)).tokens_last_minute == 0

    run(store, body)


def test_admit_takes_from_itpm_and_otpm_with_the_lease(store):
    limits = make_limits(rpm=600, tpm=60_000, itpm=6_000, otpm=600, max_concurrency=1)  # 100, 10 tokens

    async def body():
        admitted = await store.admit(limits, 60, input_tokens=50, output_tokens=8)
        assert (admitted[0].input_tokens, admitted[0].output_tokens) == (50, 8)
        snap = await store.snapshot(limits)
        assert snap.itpm_tokens_available == pytest.approx(50, abs=1)
        assert snap.otpm_tokens_available == pytest.approx(2, abs=0.1)
        await done(store, limits, admitted, give_back=True)

    run(store, body)


def test_an_admitted_lease_heartbeats_past_its_ttl(store):
    limits = make_limits(max_concurrency=1, timeout_seconds=0.4, lease_grace_seconds=0.6)  # TTL 1 s

    async def body():
        _, lease, slot = await store.admit(limits, 1)
        await asyncio.sleep(2.2)  # > 2 TTLs: only the heartbeat keeps it
        assert not lease.lost and (await levels(store, limits))[2] == 1
        with pytest.raises(LeaseBusy):
            await store.admit(limits, 1)
        lease.stop_heartbeat()  # the holder "dies": its lease comes back after the TTL, by itself
        await store.release_global_slot(slot)
        await asyncio.sleep(1.3)
        await done(store, limits, await store.admit(limits, 1))

    run(store, body)


@pytest.mark.parametrize("cap", [2, 4], ids=["leases-bind", "slots-bind"])
def test_concurrent_admits_never_exceed_the_cap_and_take_only_what_they_send(store, cap):
    limits = make_limits(rpm=60_000, tpm=6_000_000, max_concurrency=cap)  # the process has 3 slots
    calls = 24

    async def body():
        in_flight = peak = busy = 0

        async def call():
            nonlocal in_flight, peak, busy
            while True:
                try:
                    admitted = await store.admit(limits, 10)
                    break
                except LeaseBusy:
                    busy += 1
                    await store.wait_for_lease(limits)
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            await done(store, limits, admitted)

        await asyncio.gather(*(call() for _ in range(calls)))
        assert peak == min(cap, 3)
        # 2 leases: asks find them held (and take nothing); 4: the 3 slots bind, waited for before asking
        assert (busy > 0) == (cap < 3)
        # every grant was sent: exactly one request per call left the buckets, none given back
        assert (await levels(store, limits))[3] == calls and store.global_in_flight == 0

    run(store, body)


# a caller's step for SETTLE (lua.settle_script): writes its argument to its key, answers it
STEP = """
local function outcome(key, a)
  redis.call('SET', key, ARGV[a], 'PX', 60000)
  return {ARGV[a]}
end
"""


def test_settle_runs_a_callers_step_in_the_reconciles_script_where_the_store_can(store):
    limits = make_limits(rpm=600, tpm=60_000, max_concurrency=2)
    url = getattr(store, "url", "")
    key = f"{getattr(store, 'prefix', '')}q:{{{limits.name}}}:step"  # the provider's hash slot
    step = SettleOutcome(url, STEP, key, ("hello",))

    async def body():
        admitted = await store.admit(limits, 100)
        await done(store, limits, admitted)
        answer = await store.reconcile(limits, admitted[0], 40, also=step)  # 60 of the 100 back
        assert (await levels(store, limits))[1] == pytest.approx(960, abs=5)
        if store.backend == "redis":  # one script: the reconcile and the step
            assert answer == [b"hello"] and await store.command("GET", key) == b"hello"
        else:  # nothing to fold into: the caller takes its step itself
            assert answer is None and not store.folds(step)
        elsewhere = SettleOutcome("redis://elsewhere:6379/0", STEP, key, ("x",))
        assert not store.folds(elsewhere)  # a step of another server is never run here

    run(store, body)

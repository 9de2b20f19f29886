"""Admission (gateway_engine/admission.py) over both store backends, for what the quota adds: a paused
provider is refused with ProviderPaused and nothing held; the input/output split rides from the request
to the grant and back through ``settle`` to the ITPM / OTPM buckets."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from gateway_engine.admission import Admission, AdmissionRequest
from gateway_engine.live_limits import LiveLimits
from gateway_engine.options import EngineOptions
from gateway_engine.quota import LocalQuotaStore, ProviderPaused, QuotaStoreUnavailable
from gateway_engine.quota.redis_store import RedisQuotaStore

from .conftest import make_limits, redis_prefix, run


async def nothing_held(store, limits) -> None:
    snap = await store.snapshot(limits)
    assert snap.leases_in_flight == 0 and store.global_in_flight == 0
    assert snap.rpm_tokens_available == pytest.approx(snap.rpm_capacity, abs=0.05)
    assert snap.tpm_tokens_available == pytest.approx(snap.tpm_capacity, abs=5)


def test_a_paused_provider_is_refused_with_nothing_held(store):
    limits = make_limits(rpm=600, tpm=60_000)

    async def body():
        admission = Admission(store, LiveLimits(None), EngineOptions())
        await store.pause_provider(limits.name, "provider_quota_exhausted", message="spend limit")
        with pytest.raises(ProviderPaused) as info:
            await admission.admit(AdmissionRequest.for_item(limits, 100, team="", check_cancel=False))
        assert info.value.detail == "spend limit"
        await nothing_held(store, limits)

    run(store, body)


def test_a_failure_after_the_grant_and_lease_gives_both_back(store):
    # the grant and the lease are one atomic step (store.admit: a pause after it cannot split them);
    # a failure at the in-flight slot after it (the cluster cap's lease: its store down) gives back both
    limits = make_limits(rpm=600, tpm=60_000)

    async def cluster_down():  # as InFlightSlots.adopt fails: the local part given back, then the error
        store.slots.give_back_local()
        raise QuotaStoreUnavailable("the cluster lease's store is down")

    async def body():
        store.slots.adopt = cluster_down
        admission = Admission(store, LiveLimits(None), EngineOptions())
        with pytest.raises(QuotaStoreUnavailable):
            await admission.admit(AdmissionRequest.for_item(limits, 100, team="", check_cancel=False))
        await nothing_held(store, limits)

    run(store, body)


def test_the_request_carries_the_input_output_split():
    limits = make_limits(itpm=6_000, otpm=600)
    request = AdmissionRequest.for_item(
        limits, 120, input_tokens=100, output_tokens=20, team="acme", check_cancel=False
    )
    assert [(d.name, d.amount) for d in request.dimensions] == [
        ("rpm", 1), ("tpm", 120), ("itpm", 100), ("otpm", 20)
    ]  # fmt: skip
    assert (request.tokens, request.input_tokens, request.output_tokens) == (120, 100, 20)
    plain = AdmissionRequest.for_item(limits, 120, team="", check_cancel=False)
    assert (plain.input_tokens, plain.output_tokens) == (None, None)


def test_settle_charges_itpm_without_cache_reads_and_otpm_with_completion(store):
    # TPM 60/min, ITPM 10/min, OTPM 1/min over 600 s bursts: caps 600, 100 and 10; no visible refill
    limits = make_limits(rpm=60, tpm=60, burst_seconds=600.0, itpm=10, otpm=1)

    async def body():
        admission = Admission(store, LiveLimits(None), EngineOptions())
        request = AdmissionRequest.for_item(
            limits, 60, input_tokens=50, output_tokens=10, team="", check_cancel=False
        )
        admitted = await admission.admit(request)
        assert (admitted.reservation.input_tokens, admitted.reservation.output_tokens) == (50, 10)
        snap = await store.snapshot(limits)
        assert (round(snap.itpm_tokens_available), round(snap.otpm_tokens_available)) == (50, 0)
        await admitted.held.aclose()
        # 70 prompt tokens of which 45 were cache reads (and 5 cache writes, which count): ITPM 25
        usage = {"prompt_tokens": 70, "cached_tokens": 45, "cache_write_tokens": 5,
                 "completion_tokens": 4, "total_tokens": 74}  # fmt: skip
        await admission.settle(admitted, usage)
        await admitted.slot.aclose()
        snap = await store.snapshot(limits)
        assert round(snap.itpm_tokens_available) == 75 and round(snap.otpm_tokens_available) == 6
        assert snap.tpm_tokens_available == pytest.approx(600 - 74, abs=0.5)

    run(store, body)


def test_settle_without_a_split_in_the_usage_leaves_itpm_and_otpm_as_reserved(store):
    limits = make_limits(rpm=60, tpm=60, burst_seconds=600.0, itpm=10, otpm=1)

    async def body():
        admission = Admission(store, LiveLimits(None), EngineOptions())
        request = AdmissionRequest.for_item(
            limits, 20, input_tokens=15, output_tokens=5, team="", check_cancel=False
        )
        admitted = await admission.admit(request)
        await admitted.held.aclose()
        await admission.settle(admitted, {"total_tokens": 12})
        await admitted.slot.aclose()
        snap = await store.snapshot(limits)
        assert (round(snap.itpm_tokens_available), round(snap.otpm_tokens_available)) == (85, 5)
        assert snap.tpm_tokens_available == pytest.approx(600 - 12, abs=0.5)

    run(store, body)


@pytest.mark.parametrize("backend", ["local", "redis"])
def test_a_busy_cluster_cap_gives_the_grant_and_lease_back_and_waits(backend, redis_sync):
    # the cluster cap's lease follows the ADMIT (another hash slot): busy, everything goes back
    if backend == "local":
        store = LocalQuotaStore(global_max_in_flight=4, cluster_max_in_flight=1)
    else:
        store = RedisQuotaStore(
            settings.REDIS_URL, prefix=redis_prefix(), global_max_in_flight=4, cluster_max_in_flight=1
        )
    limits = make_limits(rpm=600, tpm=60_000, max_concurrency=4)

    async def body():
        admission = Admission(store, LiveLimits(None), EngineOptions())
        first = await admission.admit(AdmissionRequest.for_item(limits, 100, team="", check_cancel=False))
        second = asyncio.create_task(
            admission.admit(AdmissionRequest.for_item(limits, 100, team="", check_cancel=False))
        )
        await asyncio.sleep(0.3)
        assert not second.done()
        snap = await store.snapshot(limits)  # the waiter holds nothing: one lease, one grant (net)
        assert snap.leases_in_flight == 1 and store.global_in_flight == 1 and snap.observed_rpm == 1
        await first.held.aclose()
        await first.slot.aclose()
        admitted = await asyncio.wait_for(second, 5)
        await admission.release(admitted)  # not sent: its grant goes back
        snap = await store.snapshot(limits)
        assert snap.leases_in_flight == 0 and store.global_in_flight == 0 and snap.observed_rpm == 1

    run(store, body)
    if backend == "redis":
        keys = list(redis_sync.scan_iter(match=store.prefix + "*", count=1000))
        if keys:
            redis_sync.delete(*keys)

"""Admission (gateway_engine/admission.py) over both store backends, for what the quota adds: a paused
provider is refused with ProviderPaused and nothing held; the input/output split rides from the request
to the grant and back through ``settle`` to the ITPM / OTPM buckets."""

from __future__ import annotations

import pytest

from gateway_engine.admission import Admission, AdmissionRequest
from gateway_engine.live_limits import LiveLimits
from gateway_engine.options import EngineOptions
from gateway_engine.quota import ProviderPaused

from .conftest import make_limits, run


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


def test_a_pause_between_grant_and_lease_gives_the_grant_back(store):
    limits = make_limits(rpm=600, tpm=60_000)
    granted = store.acquire

    async def acquire_then_pause(*args, **kwargs):
        reservation = await granted(*args, **kwargs)
        await store.pause_provider(limits.name, "per_day_quota")  # another worker's answer, meanwhile
        return reservation

    async def body():
        store.acquire = acquire_then_pause
        admission = Admission(store, LiveLimits(None), EngineOptions())
        with pytest.raises(ProviderPaused):  # from try_lease
            await admission.admit(AdmissionRequest.for_item(limits, 100, team="", check_cancel=False))
        await nothing_held(store, limits)

    run(store, body)

"""The admission seam (gateway_engine/admission.py) and the outage rule (gateway_engine/outage.py) on
their own: the typed request, the grant and what release/settle give back; the backoff schedule on a
fake clock. The order of the store calls is checked in tests/engine/test_token_before_lease.py."""

from __future__ import annotations

import asyncio

import pytest

from gateway_engine.admission import Admission, AdmissionRequest, Dimension
from gateway_engine.live_limits import LiveLimits
from gateway_engine.options import EngineOptions
from gateway_engine.outage import OutageBackoff
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.quota.types import ProviderLimits
from tests.clock import FakeClock

LIMITS = ProviderLimits("p", rpm=60, tpm=10_000, burst_seconds=60, max_concurrency=2, timeout_seconds=5)


def test_the_request_carries_rpm_and_tpm_in_the_batch_lane():
    request = AdmissionRequest.for_item(LIMITS, 120, team="acme", check_cancel=True)
    assert request.dimensions == (Dimension("rpm", 1), Dimension("tpm", 120))
    assert (request.tokens, request.lane, request.team, request.check_cancel) == (120, "batch", "acme", True)


def test_an_unknown_dimension_is_refused():
    with pytest.raises(ValueError, match="unknown quota dimension"):
        Dimension("gpu_seconds", 5)


def test_admit_takes_token_lease_and_slot_and_release_gives_them_back():
    async def main() -> None:
        clock = FakeClock()
        store = LocalQuotaStore(global_max_in_flight=4, clock=clock)
        admission = Admission(store, LiveLimits(None), EngineOptions())
        full = await store.snapshot(LIMITS)
        admitted = await admission.admit(AdmissionRequest.for_item(LIMITS, 100, team="", check_cancel=False))
        assert admitted is not None and admitted.reservation.tokens == 100
        taken = await store.snapshot(LIMITS)
        assert taken.leases_in_flight == 1 and store.global_in_flight == 1
        assert taken.tpm_tokens_available == full.tpm_tokens_available - 100
        await admission.release(admitted)
        back = await store.snapshot(LIMITS)
        assert back.leases_in_flight == 0 and store.global_in_flight == 0
        assert back.tpm_tokens_available == full.tpm_tokens_available

    asyncio.run(main())


def test_a_cancelled_run_is_not_admitted_and_holds_nothing():
    async def main() -> None:
        store = LocalQuotaStore(global_max_in_flight=4, clock=FakeClock())
        admission = Admission(store, LiveLimits(None), EngineOptions(), should_cancel=lambda: True)
        full = await store.snapshot(LIMITS)
        assert (
            await admission.admit(AdmissionRequest.for_item(LIMITS, 100, team="", check_cancel=True)) is None
        )
        after = await store.snapshot(LIMITS)
        assert after.leases_in_flight == 0 and store.global_in_flight == 0
        assert after.tpm_tokens_available == full.tpm_tokens_available

    asyncio.run(main())


def test_outage_backoff_doubles_to_the_cap_and_gives_up_at_the_limit():
    clock = FakeClock()
    backoff = OutageBackoff(4.5, min_delay=0.2, max_delay=2.0, clock=clock)
    waits = []
    while (delay := backoff.next_delay()) is not None:
        waits.append(delay)
        clock.advance(delay)
    assert waits == pytest.approx([0.2, 0.4, 0.8, 1.6])  # 3.0 s waited; 3.0 + 2.0 would end past 4.5
    capped = OutageBackoff(5.0, clock=FakeClock())
    assert [capped.next_delay() for _ in range(6)][-2:] == pytest.approx([2.0, 2.0])  # never above the cap
    assert OutageBackoff(0.0, clock=clock).next_delay() is None  # 0: give up at the first failure


def test_outage_backoff_counts_from_start_now_when_asked():
    clock = FakeClock()
    backoff = OutageBackoff(1.0, clock=clock).start_now()
    clock.advance(0.9)  # the first call itself took 0.9 s
    assert backoff.next_delay() is None

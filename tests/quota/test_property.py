"""Property: for random acquire sequences, grants in any window of length w ≤ capacity + rate × w,
for the request bucket and the token bucket. Plus: a denial's wait_ms is exact (a lone caller who
waits exactly that long is granted)."""

from __future__ import annotations

import asyncio
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_engine.quota import LocalQuotaStore, Reservation
from tests.clock import FakeClock

from .conftest import assert_within_rate, make_limits, run

limits_strategy = st.builds(
    make_limits,
    rpm=st.integers(1, 6000),
    tpm=st.integers(1, 200_000),
    burst_seconds=st.sampled_from([1.0, 1.5, 5.0, 30.0]),
)
ops_strategy = st.lists(
    st.tuples(
        st.floats(0, 3000, allow_nan=False),  # ms to advance before the attempt
        st.floats(0, 1.2, allow_nan=False),  # tokens as a fraction of the TPM capacity (>1: impossible)
        st.booleans(),  # reconcile the grant with a random actual usage
        st.floats(0, 1, allow_nan=False),  # actual / reserved (refunds; debt is covered in test_buckets)
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limits=limits_strategy, ops=ops_strategy)
def test_local_grants_never_exceed_capacity_plus_rate(limits, ops):
    clock = FakeClock()
    store = LocalQuotaStore(clock=clock, global_max_in_flight=1)
    requests: list[tuple[float, int]] = []
    tokens_charged: list[tuple[float, float]] = []

    async def body():
        for advance, fraction, reconcile, ratio in ops:
            clock.advance_ms(advance)
            tokens = int(fraction * limits.tpm_capacity)
            decision = await store.try_acquire(limits, tokens)
            if tokens > limits.tpm_capacity:
                assert decision.impossible and not decision.granted
                continue
            if not decision.granted:
                assert decision.wait_ms >= 1
                # exactness: nobody else is calling, so waiting exactly wait_ms must be enough
                clock.advance_ms(decision.wait_ms)
                decision = await store.try_acquire(limits, tokens)
                assert decision.granted, "waited the announced time but was not granted"
            requests.append((decision.now_ms, 1))
            tokens_charged.append((decision.now_ms, tokens))
            if reconcile:
                actual = int(tokens * ratio)
                await store.reconcile(limits, Reservation(limits.name, tokens), actual)
                tokens_charged.append((clock() * 1000, actual - tokens))  # a refund (≤ 0)

    asyncio.run(body())
    assert_within_rate(requests, limits.rpm_per_ms, limits.rpm_capacity, "rpm")
    # net tokens (reservations minus refunds) in any window stay within capacity + rate × w
    assert_within_rate(tokens_charged, limits.tpm_per_ms, limits.tpm_capacity, "tpm")


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    rpm=st.integers(600, 3000),
    tpm=st.integers(3000, 30_000),
    ops=st.lists(st.tuples(st.floats(0, 15), st.floats(0, 1)), min_size=20, max_size=60),
)
def test_redis_grants_never_exceed_capacity_plus_rate(redis_store, rpm, tpm, ops):
    limits = make_limits(rpm=rpm, tpm=tpm, burst_seconds=1.0)
    grants: list[tuple[float, int]] = []

    async def body():
        for sleep_ms, fraction in ops:
            await asyncio.sleep(sleep_ms / 1000)
            tokens = int(fraction * limits.tpm_capacity)
            decision = await redis_store.try_acquire(limits, tokens)
            if decision.granted:
                grants.append((decision.now_ms, tokens))  # server TIME of the grant

    started = time.monotonic()
    run(redis_store, body)
    assert time.monotonic() - started < 10
    assert grants
    assert_within_rate([(t, 1) for t, _ in grants], limits.rpm_per_ms, limits.rpm_capacity, "rpm")
    assert_within_rate(grants, limits.tpm_per_ms, limits.tpm_capacity, "tpm")

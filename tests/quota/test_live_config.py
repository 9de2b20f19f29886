"""Live config: admin/load_providers changes reach running callers within 5 s."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway_engine.quota import ProviderLimits
from providers.limits import LimitsSource, UnknownProvider, get_quota_store, reset_quota_store
from providers.live_config import bump_config_version, config_version_key
from providers.models import Provider
from tests.clock import FakeClock

from .conftest import run


@pytest.fixture
def shared_store(redis_sync):
    reset_quota_store()
    yield get_quota_store()
    reset_quota_store()


@pytest.mark.django_db(transaction=True)
def test_source_reloads_when_the_version_moves(make_provider, shared_store, redis_sync):
    make_provider("alpha", rpm=60)
    loads = []

    def loader():
        from providers.limits.source import load_limits_from_db

        loads.append(1)
        return load_limits_from_db()

    # the poll alone (the fallback): change events are tested in tests/limits/test_reload.py
    clock = FakeClock()  # the refresh interval is stepped, not slept
    source = LimitsSource(store=shared_store, refresh_seconds=0.25, loader=loader, listen=False, clock=clock)

    async def body():
        limits = await source.get("alpha")
        assert isinstance(limits, ProviderLimits) and limits.rpm == 60
        with pytest.raises(UnknownProvider, match="nope"):
            await source.get("nope")
        assert len(loads) == 1
        clock.advance(0.5)
        await source.get("alpha")
        assert len(loads) == 1  # checked (interval passed), version unchanged: no DB query

        def edit():
            # as another process would: rows changed (no signal in this process), version bumped
            Provider.objects.filter(name="alpha").update(rpm=30)
            Provider.objects.bulk_create(
                [
                    Provider(
                        name="beta",
                        base_url="http://127.0.0.1:1/v1",
                        model="m",
                        rpm=5,
                        tpm=50,
                        max_concurrency=1,
                    )
                ]
            )
            redis_sync.incr(config_version_key())

        await asyncio.to_thread(edit)
        clock.advance(0.125)
        assert (await source.get("alpha")).rpm == 60  # cached until the next check...
        assert len(loads) == 1
        clock.advance(0.125)
        assert (await source.get("alpha")).rpm == 30  # ...which is refresh_seconds after the last one
        assert len(loads) == 2
        assert (await source.get("beta")).tpm == 50

    run(shared_store, body)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_lowered_rpm_reaches_running_callers_within_5s(make_provider, shared_store):
    make_provider("alpha", rpm=600, tpm=1_000_000, burst_seconds=1.0)
    source = LimitsSource(store=shared_store)  # settings.GATEWAY_CONFIG_REFRESH_SECONDS (2 s in tests)
    grants: list[float] = []
    stop = time.monotonic() + 9.0

    async def caller():
        while time.monotonic() < stop:
            limits = await source.get("alpha")
            await shared_store.acquire(limits, 10, max_wait_seconds=10)
            grants.append(time.monotonic())

    def lower():
        p = Provider.objects.get(name="alpha")
        p.rpm = 60
        p.save()

    async def body():
        callers = [asyncio.create_task(caller()) for _ in range(4)]
        await asyncio.sleep(2.0)
        await asyncio.to_thread(lower)
        changed = time.monotonic()
        await asyncio.sleep(stop - changed)
        for task in callers:
            task.cancel()
        results = await asyncio.gather(*callers, return_exceptions=True)
        assert all(r is None or isinstance(r, asyncio.CancelledError) for r in results), results
        return changed

    changed = run(shared_store, body)
    before = [t for t in grants if changed - 1.5 <= t < changed]
    after = [t for t in grants if changed + 5.0 <= t <= changed + 7.0]
    print("grants/1.5 s before the change", len(before), "grants in [+5 s, +7 s]", len(after))
    assert len(before) >= 10  # ~10/s before the change
    # 60 rpm, burst 1 s: at most 1 (capacity) + 1/s × 2 s, with one grant of slack at the edges
    assert 1 <= len(after) <= 4, (len(before), len(after))


def test_bump_config_version_moves_the_shared_counter(shared_store, redis_sync):
    async def read():
        return await shared_store.config_version()

    first = run(shared_store, read)
    bump_config_version()
    assert run(shared_store, read) == first + 1


def test_reset_quota_store_forgets_the_shared_source():
    first = LimitsSource.shared()
    assert LimitsSource.shared() is first
    reset_quota_store()
    assert LimitsSource.shared() is not first

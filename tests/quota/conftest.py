"""Fixtures for the quota engine tests: one suite per concern (test_buckets.py, test_leases.py,
test_ledger.py, test_config_version.py; their shape: test_parts.py), each parametrized over both
backends by ``store``; ``clocked_store`` is the in-process store on a fake clock, for the exact timings."""

from __future__ import annotations

import asyncio
import itertools
import uuid

import pytest
from django.conf import settings

from gateway_engine.quota import LocalQuotaStore, ProviderLimits
from gateway_engine.quota.redis_store import RedisQuotaStore
from tests.clock import FakeClock

_names = itertools.count()


def make_limits(
    rpm: int = 600,
    tpm: int = 60_000,
    burst_seconds: float = 1.0,
    max_concurrency: int = 4,
    timeout_seconds: float = 1.0,
    lease_grace_seconds: float = 1.0,
    name: str | None = None,
    itpm: int = 0,
    otpm: int = 0,
) -> ProviderLimits:
    return ProviderLimits(
        name=name or f"p{next(_names)}-{uuid.uuid4().hex[:6]}",
        rpm=rpm,
        tpm=tpm,
        burst_seconds=burst_seconds,
        max_concurrency=max_concurrency,
        timeout_seconds=timeout_seconds,
        lease_grace_seconds=lease_grace_seconds,
        itpm=itpm,
        otpm=otpm,
    )


def redis_prefix() -> str:
    return f"{settings.GATEWAY_REDIS_PREFIX}qt:{uuid.uuid4().hex[:8]}:"


def run(store, coro_fn, *args):
    """asyncio.run a coroutine function with the store, closing the store's per-loop client after."""

    async def main():
        try:
            return await coro_fn(*args)
        finally:
            await store.aclose()

    return asyncio.run(main())


@pytest.fixture(params=["local", "redis"])
def store(request, redis_sync):
    if request.param == "local":
        yield LocalQuotaStore(global_max_in_flight=3)
        return
    prefix = redis_prefix()
    yield RedisQuotaStore(settings.REDIS_URL, prefix=prefix, global_max_in_flight=3)
    keys = list(redis_sync.scan_iter(match=prefix + "*", count=1000))
    if keys:
        redis_sync.delete(*keys)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def clocked_store(clock):
    """The in-process store on ``clock`` (the Redis store's clock is the server's TIME: not fakeable)."""
    return LocalQuotaStore(clock=clock, global_max_in_flight=3)


@pytest.fixture
def redis_store(redis_sync):
    prefix = redis_prefix()
    yield RedisQuotaStore(settings.REDIS_URL, prefix=prefix, global_max_in_flight=3)
    keys = list(redis_sync.scan_iter(match=prefix + "*", count=1000))
    if keys:
        redis_sync.delete(*keys)


def assert_within_rate(grants: list[tuple[float, int]], rate_per_ms: float, capacity: float, what: str):
    """grants: (time ms, amount). In every window [t_i, t_j]: sum ≤ capacity + rate × (t_j − t_i)."""
    grants = sorted(grants, key=lambda g: g[0])  # stable: ties keep their order of occurrence
    for i in range(len(grants)):
        total = 0.0
        for j in range(i, len(grants)):
            total += grants[j][1]
            bound = capacity + rate_per_ms * (grants[j][0] - grants[i][0]) + 1e-6
            assert total <= bound, (
                f"{what}: {total} granted in [{grants[i][0]:.3f}, {grants[j][0]:.3f}] ms > bound {bound:.3f}"
            )


@pytest.fixture
def private_redis_store(private_redis):
    """A RedisQuotaStore on this run's private redis-server (tests that SCRIPT FLUSH or CLIENT KILL)."""
    return RedisQuotaStore(private_redis, prefix=redis_prefix(), global_max_in_flight=3)

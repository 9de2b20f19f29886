"""No idle token holders: an item that cannot get a concurrency slot gives its bucket token back.

Before this rule, items took a bucket token and then waited for a provider lease; the tokens granted
meanwhile went out all at once when the leases freed, so the provider saw more than the bucket's
capacity + rate × window. Measured here at a real local HTTP server (the simulator), both stores.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.conf import settings

from bench.common import peak_burst
from gateway_engine import CrossProviderBatcher, EngineOptions
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.routing import ProviderConfig, routing_table
from sim.testing import run_simulator_in_thread

RATE = 20.0  # requests per second at the gateway (rpm 1,200), bucket capacity 20 (burst 1 s)
CONCURRENCY = 8
ITEMS = 80
HOLD_S = 1.2

SIM = {
    "time_scale": 1,
    "seed": 3,
    "trace_tag_regex": r"\[(t\d+)\]",
    # no rate limit at the simulator: it only records when requests arrive
    "providers": {"burst": {"model": "burst-m", "median_ms": 5, "sigma": 0.1}},
}


@pytest.fixture(params=["local", "redis"])
def quota_store(request, redis_sync):
    if request.param == "local":
        yield LocalQuotaStore(global_max_in_flight=64)
        return
    prefix = f"{settings.GATEWAY_REDIS_PREFIX}idle:{uuid.uuid4().hex[:8]}:"
    yield RedisQuotaStore(settings.REDIS_URL, prefix=prefix, global_max_in_flight=64)
    keys = list(redis_sync.scan_iter(match=prefix + "*", count=1000))
    if keys:
        redis_sync.delete(*keys)


def test_waiters_hold_no_tokens_and_provider_never_sees_more_than_the_bucket(quota_store):
    store = quota_store
    with run_simulator_in_thread(SIM) as sim:
        config = ProviderConfig.from_dict(
            {
                "name": "burst",
                "base_url": sim.provider_url("burst"),
                "model": "burst-m",
                "rpm": int(RATE * 60),
                "tpm": 100_000_000,
                "burst_seconds": 1,
                "max_concurrency": CONCURRENCY,
                "timeout_seconds": 5,
                "max_retries": 0,
            }
        )
        limits = config.limits
        capacity = limits.rpm_capacity
        batcher = CrossProviderBatcher(
            routing_table([config]),
            store=store,
            # many dispatchers per provider, as with several worker processes
            options=EngineOptions(provider_workers_min=40, seed=1),
        )
        items = [
            {
                "custom_id": f"t{i}",
                "provider": "burst",
                "query": f"[t{i}] question",
                "params": {"max_tokens": 8},
            }
            for i in range(ITEMS)
        ]

        give_backs = []  # bucket grants given back (RELEASE): a busy lease must cost none (store.admit)
        give_back = store.buckets.give_back

        async def counted_give_back(*args, **kwargs):
            give_backs.append(args[0].name)
            await give_back(*args, **kwargs)

        store.buckets.give_back = counted_give_back

        async def main():
            try:
                # every lease is busy (held by "another worker") while the batch starts
                held = [await store.try_lease(limits) for _ in range(CONCURRENCY)]
                assert all(lease is not None for lease in held)
                run = asyncio.ensure_future(batcher.abatch(items))
                await asyncio.sleep(HOLD_S)
                levels = []
                for _ in range(5):
                    levels.append((await store.snapshot(limits)).rpm_tokens_available)
                    await asyncio.sleep(0.05)
                sent_while_held = sim.provider_counters("burst")["requests"]
                for lease in held:
                    await store.release_lease(limits, lease)
                results = await asyncio.wait_for(run, 60)
                return levels, sent_while_held, results
            finally:
                await store.aclose()

        levels, sent_while_held, results = asyncio.run(main())
        trace = sim.trace()

    assert sent_while_held == 0
    # while nobody can send, nobody takes a token: the grant and the lease are one atomic step, so a
    # held lease takes nothing and the bucket stays full (before the ADMIT: tokens taken and given back)
    assert min(levels) >= capacity - 0.01, (levels, capacity)
    assert give_backs == []  # the in-flight slots (64) never bind here: nothing was ever given back
    assert all(r.ok for r in results), [r.as_result() for r in results if not r.ok][:3]
    arrivals = [row["arrival_s"] for row in trace if row["provider"] == "burst"]
    assert len(arrivals) == ITEMS
    # once the leases free, the provider never sees more than capacity + rate × window
    # (+2: arrival times at the server jitter by a few ms against the bucket's clock)
    burst = peak_burst(arrivals, RATE)
    assert burst <= capacity + 2, (burst, capacity)

"""A 529 burst acts on an item once: while the provider's breaker is open, a retry waits for the breaker
(its cooldown, then its probe) instead of its retry backoff as well (docs/engine.md "Retries and
backoff"; gateway_engine/waits.py ``retry_delay``).

The simulator's Anthropic provider answers 529 ``overloaded_error`` for the first seconds. The breaker
opens at the first 529 with a short cooldown; the retry backoff is made absurdly long (an overloaded
answer's policy: minutes). Stacked, every item that failed would sleep its backoff and miss its 20 s
deadline; with the cooldown replacing the backoff, every item is served once the burst is over, and
the provider saw only what the breaker let through during the burst: the calls admitted before it
opened, then one probe at a time."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from gateway_engine import CrossProviderBatcher, EngineOptions
from gateway_engine.backoff import BACKOFF_POLICIES, PROVIDER_OVERLOAD
from gateway_engine.breaker import BreakerConfig, LocalBreaker, cooldown_ladder_ms
from gateway_engine.breaker_redis import RedisBreaker
from gateway_engine.error_kinds import ERROR_KINDS
from gateway_engine.items import WorkItem
from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.retry import ErrorType, RetryPolicy
from gateway_engine.routing import routing_table
from gateway_engine.wire import KNOWN_KINDS
from sim.testing import sim_server  # noqa: F401 - the fixture

from .test_kind_failures_sim import sim_provider

pytestmark = pytest.mark.skipif("anthropic" not in KNOWN_KINDS, reason="needs the anthropic wire module")

BURST_S = 2.0
CONCURRENCY = 4
ITEMS = 8
BREAKER = BreakerConfig(consecutive_failures=1, cooldown_seconds=0.25, max_cooldown_seconds=1.0)
# minutes of backoff for an overloaded answer (base 4 × 60 s): a stacked backoff misses the deadline
SLOW_RETRY = RetryPolicy(base_seconds=60.0, cap_seconds=120.0)


def probes_within(seconds: float) -> int:
    """The most half-open probes the breaker's cooldown ladder lets through in ``seconds``."""
    ladder, spent, probes = cooldown_ladder_ms(BREAKER), 0.0, 0
    while spent <= seconds * 1000.0:
        spent += ladder[min(probes, len(ladder) - 1)]
        probes += 1
    return probes


def run(config, items, backend):
    prefix = f"{settings.GATEWAY_REDIS_PREFIX}overload-burst-{backend}:"
    store = RedisQuotaStore(settings.REDIS_URL, prefix=prefix)
    breaker = (
        LocalBreaker(BREAKER)
        if backend == "local"
        else RedisBreaker(settings.REDIS_URL, prefix=prefix, config=BREAKER)
    )
    options = EngineOptions(retry=SLOW_RETRY, max_breaker_wait_seconds=60.0, seed=5)
    batcher = CrossProviderBatcher(routing_table([config]), store=store, breaker=breaker, options=options)
    return {r.custom_id: r for r in batcher.batch(items)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["local", "redis"])
def test_a_529_burst_waits_for_the_breaker_not_for_the_backoff_too(sim_server, redis_sync, backend):  # noqa: F811
    assert ERROR_KINDS[ErrorType.OVERLOADED].backoff == PROVIDER_OVERLOAD
    assert SLOW_RETRY.ceiling(0, PROVIDER_OVERLOAD) == 240.0 > SLOW_RETRY.ceiling(0)  # 529 longer than 5xx
    assert BACKOFF_POLICIES[PROVIDER_OVERLOAD].base_scale > 1
    sim = sim_server(
        {
            "providers": {
                "first": {
                    "kind": "anthropic",
                    "model": "first-m",
                    "median_ms": 5,
                    "sigma": 0.1,
                    "rpm": 60_000,
                    "tpm": 10_000_000,
                    "max_concurrency": CONCURRENCY,
                    "overload": {"period_s": 3600, "duration_s": BURST_S},
                }
            }
        }
    )
    config = sim_provider(sim, "first", "anthropic", max_concurrency=CONCURRENCY, max_retries=20)
    deadline = time.time() + 20.0
    items = [
        WorkItem(f"o{i}", [{"role": "user", "content": f"q{i}"}], provider="first", deadline=deadline)
        for i in range(ITEMS)
    ]
    results = run(config, items, backend)

    assert [r.status for r in results.values()] == ["succeeded"] * ITEMS, [
        (r.custom_id, r.status, r.error_type, r.error_message) for r in results.values()
    ]
    counters = sim.provider_counters("first")
    sent = sim.request_counts()["first"]
    overloaded = counters["overloaded"]
    failed_first = sum(1 for r in results.values() if r.attempt_log[0]["error_type"] == ErrorType.OVERLOADED)
    assert failed_first >= 1  # the burst was seen
    # what the breaker let through during the burst: each item's first call (admitted before the breaker
    # opened: the permit comes before the quota wait), then the half-open probes, one at a time
    assert overloaded - failed_first <= probes_within(BURST_S + 1.0), (overloaded, sent)
    assert sum(sent.values()) == overloaded + ITEMS  # after the burst: each item answered once
    assert sim.shape_rejections() == {"first": 0}

"""Waiting on an open breaker is bounded and reported honestly (#13).

Pre-fix the wait was a sum of *planned* sleeps checked before sleeping, so items gave up early and
said "open for more than 120 s" whatever they had waited; sent items were relabelled no_provider."""

from __future__ import annotations

import asyncio

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.routing import routing_table_from_config


def table(url: str):
    return routing_table_from_config(
        {
            "providers": [
                {"name": "down", "base_url": url, "model": "m", "rpm": 6000, "tpm": 10**6,
                 "max_concurrency": 2, "timeout_seconds": 5, "max_retries": 3}
            ],
            "routes": [],
        }
    )  # fmt: skip


def test_unsent_items_end_no_provider_with_the_real_wait(broken):
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=1, cooldown_seconds=60))
    asyncio.run(breaker.record("down", ok=False))  # open for 60 s
    before = broken.counts()["by_mode"].get("ok", 0)
    batcher = CrossProviderBatcher(
        table(broken.url("ok")),
        breaker=breaker,
        options=EngineOptions(retry=RetryPolicy(0.01, 0.05), max_breaker_wait_seconds=0.4),
    )
    results = batcher.batch([{"custom_id": f"u{i}", "provider": "down", "query": "q"} for i in range(3)])
    assert broken.counts()["by_mode"].get("ok", 0) == before  # nothing was sent
    for r in results:
        assert (r.status, r.error_type, r.error_status_code, r.attempts) == ("failed", "no_provider", None, 0)
        assert r.error_message.startswith("never sent: circuit breaker open for down: waited ")
        waited = float(r.error_message.split("waited ")[1].split(" s")[0])
        assert 0.4 <= waited < 5 and "(limit 0.4 s)" in r.error_message


def test_a_sent_item_keeps_its_last_error_when_the_breaker_stays_open(broken):
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=1, cooldown_seconds=60))
    batcher = CrossProviderBatcher(
        table(broken.url("odd_headers")),  # 503 with nonsense rate-limit headers
        breaker=breaker,
        options=EngineOptions(retry=RetryPolicy(0.01, 0.05), max_breaker_wait_seconds=0.3),
    )
    (r,) = batcher.batch([{"custom_id": "s1", "provider": "down", "query": "q"}])
    assert (r.error_type, r.error_status_code, r.attempts) == ("server_error", 503, 1)
    assert "; not retried: circuit breaker open for down: waited " in r.error_message
    assert r.error_message.startswith("upstream [address] failed")

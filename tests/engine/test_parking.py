"""Parked items (docs/engine.md "Failure isolation"): an item waiting out a backoff or an open breaker
holds no worker of its provider's queue, and a draining run gives it back at once with what it spent.
In-process engine against the real local provider server."""

from __future__ import annotations

import asyncio
import time

from gateway_engine import CrossProviderBatcher, EngineOptions, ItemFeed, RetryPolicy, RunControl
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.routing import ProviderConfig, routing_table
from tests.factories import work_item

from .provider_server import Reply, ok_reply


def config(server, name: str) -> ProviderConfig:
    return ProviderConfig.from_dict(
        {"name": name, "base_url": server.url(name), "model": f"{name}-m", "rpm": 60_000,
         "tpm": 10_000_000, "max_concurrency": 1, "timeout_seconds": 5, "max_retries": 1}
    )  # fmt: skip


def test_items_in_backoff_hold_no_worker_of_their_queue(provider_server):
    """12 items whose answers are 500 (retried after a 3–6 s backoff) fill the provider's 8 workers;
    an item behind them is sent at once, not after their backoffs (before: a worker slept with each)."""
    provider_server.behaviours["flaky"] = lambda n, rid, a, b: ok_reply() if rid == "good" else Reply(500)
    options = EngineOptions(retry=RetryPolicy(base_seconds=6.0, cap_seconds=6.0), seed=5)
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=1000, min_requests=1000))
    batcher = CrossProviderBatcher(
        routing_table([config(provider_server, "flaky")]), breaker=breaker, options=options
    )
    items = [work_item(f"p{i:02d}", provider="flaky") for i in range(12)] + [
        work_item("good", provider="flaky")
    ]
    started = time.monotonic()
    results = {r.custom_id: r for r in batcher.batch(items)}
    good = provider_server.hits_for("good")
    assert results["good"].ok and len(good) == 1
    # sent right after the first attempts of the twelve (one at a time: max_concurrency 1), long
    # before any of them was retried
    assert good[0].at - started < 2.0
    second_tries = [h.at for h in provider_server.hits if h.request_id != "good" and h.attempt == 2]
    assert second_tries and good[0].at < min(second_tries)


def test_a_draining_run_gives_parked_items_back_with_their_retry_state(provider_server):
    """Items waiting out an open breaker come back ``released`` as soon as the run drains, carrying
    their attempts per provider and their breaker wait (before: the run stayed open until the breaker's
    cooldown had passed)."""
    provider_server.behaviours["down"] = lambda n, rid, a, b: Reply(500)
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=2, cooldown_seconds=30))
    options = EngineOptions(retry=RetryPolicy(0.01, 0.02), max_breaker_wait_seconds=60, seed=3)
    table = routing_table([config(provider_server, "down")])

    async def run(items, drain_after: float):
        feed, control = ItemFeed(), RunControl()
        batcher = CrossProviderBatcher(table, breaker=breaker, options=options)
        task = asyncio.ensure_future(batcher.abatch(feed, control=control))
        feed.put(items)
        await asyncio.sleep(drain_after)
        parked = control.parked()
        feed.close()
        control.drain()
        t = time.monotonic()
        results = await asyncio.wait_for(task, 10)
        return results, parked, time.monotonic() - t

    items = [work_item(f"d{i}", provider="down") for i in range(3)]
    results, parked, drained_in = asyncio.run(run(items, 1.0))
    assert len(parked) == 3 and drained_in < 1.0  # not the 30 s cooldown
    sent = provider_server.count("down")
    assert 2 <= sent <= 3  # the breaker opened after two failures (a third may hold its permit already)
    for r in results:
        assert r.status == "released" and r.retry_state is not None
        assert r.retry_state.breaker_waited >= 0.5
    tried = {r.custom_id: dict(r.retry_state.tried) for r in results}
    assert sum(n for t in tried.values() for n in t.values()) == sent
    assert sum(r.attempts for r in results) == sent

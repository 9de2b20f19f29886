"""Items that never failed at a provider are woken the moment a probe in their process closes its
breaker (docs/engine.md, "Failure isolation").

Before: every waiter polled the half-open breaker, and the last probe's batch was deferred even while
its own probe was out; the poisoned items that opened the breaker could win the race after a healthy
probe closed it, open it again, and keep the well-formed ones waiting past their breaker-wait limit
(tests/faults/test_isolation.py, 1 run in 5 on a quiet machine)."""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.attempts import ItemState
from gateway_engine.breaker import HALF_OPEN, OPEN, BreakerConfig, LocalBreaker, Permit
from gateway_engine.breaker_wakes import probe_succeeded, wait_for_close
from gateway_engine.items import ItemResult, WorkItem
from gateway_engine.routing import routing_table
from gateway_engine.waits import FAILED_PROBE_DEFER_SECONDS, HALF_OPEN_POLL_SECONDS, breaker_wait
from tests.factories import work_item

from .test_batcher import provider


def state(batch: str, failed_at: dict[str, int], cands) -> ItemState:
    item = WorkItem("i1", [{"role": "user", "content": "q"}], provider=cands[0].name, batch_id=batch)
    return ItemState(item, ItemResult("i1", "failed"), "k", list(cands), 10, per_provider=dict(failed_at))


CTX = SimpleNamespace(options=EngineOptions(max_breaker_wait_seconds=40), rng=random.Random(1))
HALF = Permit(False, HALF_OPEN, wait_seconds=5.0, last_prober="b1")


def test_the_probes_batch_is_not_deferred_while_its_probe_is_out_and_waits_for_the_close(provider_server):
    cands = [provider(provider_server, "p")]
    wait = breaker_wait(CTX, state("b1", {}, cands), cands, [HALF])
    assert wait is not None and wait.breaker
    assert wait.seconds < HALF_OPEN_POLL_SECONDS + 0.05 + 1e-9  # no FAILED_PROBE_DEFER on top
    assert wait.close_of == "p"


def test_an_item_that_failed_there_keeps_polling_deferred(provider_server):
    cands = [provider(provider_server, "p")]
    wait = breaker_wait(CTX, state("b2", {"p": 1}, cands), cands, [HALF])
    assert wait is not None and wait.close_of == ""
    assert wait.seconds >= HALF_OPEN_POLL_SECONDS + FAILED_PROBE_DEFER_SECONDS


def test_the_last_probers_batch_still_yields_an_open_breakers_next_probe(provider_server):
    cands = [provider(provider_server, "p")]
    opened = Permit(False, OPEN, wait_seconds=0.1, last_prober="b1")
    assert (
        breaker_wait(CTX, state("b1", {}, cands), cands, [opened]).seconds >= 0.1 + FAILED_PROBE_DEFER_SECONDS
    )
    assert (
        breaker_wait(CTX, state("b9", {}, cands), cands, [opened]).seconds < 0.1 + FAILED_PROBE_DEFER_SECONDS
    )


def test_a_close_wakes_only_that_providers_waiters():
    async def main():
        mine = asyncio.create_task(wait_for_close("wake-a", 30))
        other = asyncio.create_task(wait_for_close("wake-b", 0.3))
        await asyncio.sleep(0)
        probe_succeeded("wake-a")
        return await mine, await other

    assert asyncio.run(main()) == (True, False)


def test_a_healthy_probe_in_the_engine_wakes_the_waiters(provider_server):
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=1, cooldown_seconds=0.05))
    asyncio.run(breaker.record("wp", ok=False))  # open; half-open (a probe) after 50 ms
    time.sleep(0.1)
    batcher = CrossProviderBatcher(
        routing_table([provider(provider_server, "wp")]),
        breaker=breaker,
        options=EngineOptions(retry=RetryPolicy(0.01, 0.05)),
    )

    async def main():
        waiter = asyncio.create_task(wait_for_close("wp", 30))
        await asyncio.sleep(0)
        (result,) = await batcher.abatch([work_item("probe-1", provider="wp")])
        return result, await asyncio.wait_for(waiter, 5)

    result, woken = asyncio.run(main())
    assert result.ok and result.attempts == 1 and provider_server.count("wp") == 1
    assert woken is True

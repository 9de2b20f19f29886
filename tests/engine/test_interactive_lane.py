"""gateway_engine.interactive without Django: one process's InteractiveLane over an in-process quota
store and breaker against the simulator — a plain call, a stream read to its end and settled, the max
wait as the item's deadline, and batch asks yielding while an interactive call waits."""

from __future__ import annotations

import asyncio
import time

from gateway_engine import EngineOptions, WorkItem
from gateway_engine.breaker import LocalBreaker
from gateway_engine.interactive import InteractiveLane
from gateway_engine.quota import LocalQuotaStore
from gateway_engine.routing import ProviderConfig, routing_table
from gateway_engine.streaming import final_outcome
from sim.testing import run_simulator_in_thread


def lane_for(sim, store, **limits) -> InteractiveLane:
    config = ProviderConfig.from_dict({"name": "gpt", "base_url": sim.provider_url("gpt"), "model": "gpt-sim",
                                       **{"rpm": 6000, "tpm": 10**6, "max_concurrency": 4, **limits}})  # fmt: skip
    table = routing_table([config])

    async def current():
        return table

    return InteractiveLane(
        current, store=store, breaker=LocalBreaker(), limits_source=None, options=EngineOptions()
    )


def item(cid: str, content: str = "hi", wait: float = 10.0) -> WorkItem:
    return WorkItem(cid, [{"role": "user", "content": content}], {"max_tokens": 8}, provider="gpt", key=cid,
                    deadline=time.time() + wait)  # fmt: skip


def test_a_plain_call_and_a_stream_through_the_lane():
    with run_simulator_in_thread({"providers": {"gpt": {"model": "gpt-sim", "median_ms": 2}}}) as sim:

        async def main():
            store = LocalQuotaStore()
            lane = lane_for(sim, store)
            try:
                plain = await lane.complete(item("c1"))
                assert plain.ok and plain.attempts == 1 and plain.response["object"] == "chat.completion"
                opened = await lane.open_stream(item("c2"))
                assert opened.stream is not None
                stream = opened.stream.outcome.stream
                chunks = [c async for c in stream.chunks()]
                result = await lane.end_stream(opened.stream, final_outcome(stream))
                assert chunks and result.ok and result.completion_tokens == 8
                assert result.response["choices"][0]["message"]["content"].startswith("[gpt]")
                assert store.global_in_flight == 0
            finally:
                await lane.aclose()

        asyncio.run(main())
        assert sim.request_counts()["gpt"] == {"c1": 1, "c2": 1}


def test_the_deadline_bounds_the_wait_and_batch_asks_yield_meanwhile():
    with run_simulator_in_thread({"providers": {"gpt": {"model": "gpt-sim", "median_ms": 2}}}) as sim:

        async def main():
            store = LocalQuotaStore()
            lane = lane_for(sim, store, rpm=60, burst_seconds=1.0)  # one request now, the next in a second
            try:
                assert (await lane.complete(item("first"))).ok
                waiting = asyncio.ensure_future(lane.complete(item("second", wait=0.3)))
                await asyncio.sleep(0.1)
                limits = await lane.limits.provider((await lane.table()).providers["gpt"])
                assert await store.interactive_waiters("gpt") == 1
                assert not (await store.try_acquire(limits, 1)).granted  # a batch ask yields
                second = await waiting
                assert second.status == "expired" and second.attempts == 0
                assert await store.interactive_waiters("gpt") == 0
            finally:
                await lane.aclose()

        asyncio.run(main())
        assert sim.request_counts()["gpt"] == {"first": 1}


def test_interactive_answers_feed_the_shared_key_state():
    """A plain answer and a stream's end both carry the provider's remaining-quota headers into the
    store (recording.OutcomeRecorder.follow): a key an outside client drained below half is followed."""
    from tests.waiting import wait_until

    # the key: 600 rpm (10/s), a bucket of 50; the outside client takes 30/s for 1.5 s: ~20 left
    config = {"shared_keys": {"key": {"rpm": 600, "burst_seconds": 5, "outside": {"rps": 30, "duration_s": 1.5}}},
              "providers": {"gpt": {"model": "gpt-sim", "median_ms": 2, "shared_key": "key"}}}  # fmt: skip
    with run_simulator_in_thread(config) as sim:
        wait_until(
            lambda: sim.counters()["shared_keys"]["key"]["outside_sent"] == 45, 10, what="outside done"
        )

        async def main():
            adjusted = []
            for streamed in (False, True):
                store = LocalQuotaStore()
                lane = lane_for(sim, store, rpm=600, burst_seconds=1.0)
                try:
                    if streamed:
                        opened = await lane.open_stream(item("s1"))
                        stream = opened.stream.outcome.stream
                        _ = [c async for c in stream.chunks()]
                        assert (await lane.end_stream(opened.stream, final_outcome(stream))).ok
                    else:
                        assert (await lane.complete(item("p1"))).ok
                    limits = await lane.limits.provider((await lane.table()).providers["gpt"])
                    assert limits.adaptive  # the default for an openai provider
                    adjusted.append((await store.snapshot(limits)).adjusted_rpm)
                finally:
                    await lane.aclose()
            return adjusted

        adjusted = asyncio.run(main())
    # ~20 left of 50, the bucket full again in ~3 s: about 400/min instead of the configured 600
    assert all(a is not None and a < 600 for a in adjusted), adjusted

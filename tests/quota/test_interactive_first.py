"""Interactive first, in the quota store (quota/priority.py, the ACQUIRE script's interactive marks):
while an interactive caller waits for a provider, every batch ask of every process yields; interactive
asks never do; the mark goes with the last waiter, or expires by itself when its process dies.

Tests taking ``store`` run against both backends (conftest.py); one test uses a second Redis client as
the "other worker"."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from gateway_engine.quota import priority
from gateway_engine.quota.lua import YIELD_MS
from gateway_engine.quota.redis_store import RedisQuotaStore

from .conftest import make_limits, redis_prefix, run


def test_a_batch_ask_yields_while_an_interactive_mark_is_live_and_an_interactive_ask_does_not(store):
    limits = make_limits(rpm=600, burst_seconds=1.0)  # 10 tokens

    async def body():
        assert (await store.try_acquire(limits, 1)).granted  # batch, nobody waiting: granted
        async with store.interactive_waiting(limits.name):
            assert await store.interactive_waiters(limits.name) == 1
            batch = await store.try_acquire(limits, 1)
            assert not batch.granted and not batch.impossible and batch.wait_ms == YIELD_MS
            assert (await store.try_acquire(limits, 1, lane="interactive")).granted
        assert await store.interactive_waiters(limits.name) == 0
        assert (await store.try_acquire(limits, 1)).granted  # the mark went with the last waiter
        state = await store.snapshot(limits)
        assert int(state.rpm_tokens_available) == 7  # 3 granted, the yielded ask took nothing

    run(store, body)


def test_the_mark_is_one_per_process_and_goes_with_its_last_waiter(store):
    limits = make_limits()

    async def body():
        async def waiter(hold: asyncio.Event):
            async with store.interactive_waiting(limits.name):
                await hold.wait()

        first, second = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(waiter(first))
        b = asyncio.create_task(waiter(second))
        await asyncio.sleep(0.05)
        assert await store.interactive_waiters(limits.name) == 1  # two waiters, one mark
        first.set()
        await a
        assert await store.interactive_waiters(limits.name) == 1  # b still waits
        assert not (await store.try_acquire(limits, 1)).granted
        second.set()
        await b
        assert await store.interactive_waiters(limits.name) == 0
        assert (await store.try_acquire(limits, 1)).granted

    run(store, body)


def test_a_mark_renews_while_its_waiter_waits_and_expires_when_nobody_renews_it(store, monkeypatch):
    monkeypatch.setattr(priority, "TTL_MS", 300)
    monkeypatch.setattr(priority, "RENEW_S", 0.1)
    limits = make_limits()

    async def body():
        async with store.interactive_waiting(limits.name):
            await asyncio.sleep(0.6)  # twice the TTL: renewed meanwhile
            assert await store.interactive_waiters(limits.name) == 1
        # a process that died leaves its mark behind: it holds batch asks back for TTL_MS at most
        await store.buckets.mark_interactive(limits.name, "dead-process", 300)
        assert not (await store.try_acquire(limits, 1)).granted
        await asyncio.sleep(0.4)
        assert await store.interactive_waiters(limits.name) == 0
        assert (await store.try_acquire(limits, 1)).granted

    run(store, body)


@pytest.mark.parametrize("lane, waits", [("batch", True), ("interactive", False)])
def test_a_waiting_batch_acquire_is_held_back_by_another_workers_interactive_caller(redis_sync, lane, waits):
    """Two stores on one Redis (two workers): worker B's batch acquire waits while worker A's
    interactive caller holds its mark, and is granted once A's caller leaves; B's interactive acquire
    is not held back."""
    prefix = redis_prefix()
    a = RedisQuotaStore(settings.REDIS_URL, prefix=prefix)
    b = RedisQuotaStore(settings.REDIS_URL, prefix=prefix)
    limits = make_limits(rpm=600, burst_seconds=1.0)

    async def body():
        try:
            release = asyncio.Event()

            async def interactive_waits():
                async with a.interactive_waiting(limits.name):
                    await release.wait()

            held = asyncio.create_task(interactive_waits())
            await asyncio.sleep(0.05)
            grant = asyncio.create_task(b.acquire(limits, 1, lane=lane))
            await asyncio.sleep(0.3)
            assert grant.done() is not waits
            release.set()
            await held
            reservation = await asyncio.wait_for(grant, 2.0)
            assert reservation.tokens == 1
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(body())
    keys = list(redis_sync.scan_iter(match=prefix + "*", count=1000))
    if keys:
        redis_sync.delete(*keys)

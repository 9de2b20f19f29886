"""Subprocess helper for the multi-process quota tests (not a test module).

python -m tests.quota.hammer acquire URL PREFIX NAME RPM BURST START_EPOCH DURATION
    -> prints the number of grants between START_EPOCH and START_EPOCH + DURATION
python -m tests.quota.hammer hold URL PREFIX NAME MAX_CONCURRENCY TIMEOUT GRACE
    -> takes every lease slot, prints "held", then sleeps (heartbeating) until killed (max 60 s)
"""

from __future__ import annotations

import asyncio
import sys
import time

from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.quota.types import ProviderLimits


async def hammer(store, limits, start: float | None, duration: float, callers: int = 4) -> int:
    if start is None:  # handshake: connected and ready, then wait for "go <epoch>" on stdin
        await store.ping()
        print("ready", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        start = float(line.split()[1])
    await asyncio.sleep(max(0.0, start - time.time()))
    end = start + duration
    grants = 0

    async def caller():
        nonlocal grants
        while True:
            await store.acquire(limits)
            if time.time() > end:
                return
            grants += 1

    await asyncio.gather(*(caller() for _ in range(callers)))
    await store.aclose()
    return grants


async def tpm(store, limits, duration: float, seed: int, callers: int = 4) -> list:
    """Random-size token requests; returns every grant as [server ms, tokens]."""
    import random

    await store.ping()
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    start = float(line.split()[1])
    await asyncio.sleep(max(0.0, start - time.time()))
    end = start + duration
    rng = random.Random(seed)
    grants = []

    async def caller():
        while time.time() < end:
            tokens = rng.randint(1, int(limits.tpm_capacity) // 10)
            decision = await store.try_acquire(limits, tokens)
            if decision.granted:
                grants.append([decision.now_ms, tokens])
            else:
                await asyncio.sleep(decision.wait_ms / 1000)

    await asyncio.gather(*(caller() for _ in range(callers)))
    await store.aclose()
    return grants


async def hold(store, limits) -> None:
    async def one(ready: asyncio.Event):
        async with store.lease(limits):
            ready.set()
            await asyncio.sleep(60)

    events = [asyncio.Event() for _ in range(limits.max_concurrency)]
    tasks = [asyncio.create_task(one(ev)) for ev in events]
    for ev in events:
        await ev.wait()
    print("held", flush=True)
    await asyncio.gather(*tasks)


def main(argv: list[str]) -> None:
    mode, url, prefix, name = argv[:4]
    store = RedisQuotaStore(url, prefix=prefix, global_max_in_flight=1, cluster_max_in_flight=0)
    if mode == "acquire":
        rpm, burst, duration = int(argv[4]), float(argv[5]), float(argv[7])
        start = None if argv[6] == "stdin" else float(argv[6])
        limits = ProviderLimits(
            name, rpm=rpm, tpm=10**9, burst_seconds=burst, max_concurrency=1, timeout_seconds=1
        )
        print(asyncio.run(hammer(store, limits, start, duration)), flush=True)
    elif mode == "tpm":
        import json

        rpm, tpm_rate, duration, seed = int(argv[4]), int(argv[5]), float(argv[6]), int(argv[7])
        limits = ProviderLimits(
            name, rpm=rpm, tpm=tpm_rate, burst_seconds=1, max_concurrency=1, timeout_seconds=1
        )
        print(json.dumps(asyncio.run(tpm(store, limits, duration, seed))), flush=True)
    elif mode == "hold":
        conc, timeout, grace = int(argv[4]), float(argv[5]), float(argv[6])
        limits = ProviderLimits(
            name,
            rpm=60,
            tpm=1000,
            burst_seconds=1,
            max_concurrency=conc,
            timeout_seconds=timeout,
            lease_grace_seconds=grace,
        )
        asyncio.run(hold(store, limits))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])

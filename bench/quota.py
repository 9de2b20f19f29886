"""Quota engine benchmark: cost of the shared buckets and leases against local Redis.

    .venv/bin/python bench/quota.py [--seconds 3] [--concurrency 16] [--redis-url URL] [--no-write]

One process, one event loop, limits high enough that nothing ever waits, so the figures are the
store's own overhead:
  - sequential: one coroutine; latency of each `acquire` (one EVALSHA: RPM+TPM buckets and the
    observed-rate counters) and of each lease enter+exit (lease script + ZREM); cycles/s of the full
    acquire → lease → release sequence the engine runs per provider call.
  - concurrent: --concurrency coroutines doing that cycle at once (pooled connections).
The in-process store is measured the same way for comparison.
Results are written to docs/benchmarks.md between the `quota` markers.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import machine, pct, replace_section  # noqa: E402
from gateway_engine.quota.local import LocalQuotaStore  # noqa: E402
from gateway_engine.quota.redis_store import RedisQuotaStore  # noqa: E402
from gateway_engine.quota.types import ProviderLimits  # noqa: E402

LIMITS = ProviderLimits(
    "bench", rpm=1_000_000, tpm=1_000_000_000, burst_seconds=60, max_concurrency=10_000, timeout_seconds=30
)


async def sequential(store, seconds: float) -> dict:
    acquire_us, lease_us = [], []
    cycles = 0
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        if t0 > end:
            break
        await store.acquire(LIMITS, 100)
        t1 = time.perf_counter()
        async with store.lease(LIMITS):
            pass
        t2 = time.perf_counter()
        acquire_us.append((t1 - t0) * 1e6)
        lease_us.append((t2 - t1) * 1e6)
        cycles += 1
    return {
        "cycles_per_s": cycles / seconds,
        "acquire_p50_us": pct(acquire_us, 0.5),
        "acquire_p99_us": pct(acquire_us, 0.99),
        "lease_p50_us": pct(lease_us, 0.5),
        "lease_p99_us": pct(lease_us, 0.99),
    }


async def concurrent(store, seconds: float, concurrency: int) -> dict:
    cycles = 0
    latencies = []
    end = time.perf_counter() + seconds

    async def worker():
        nonlocal cycles
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            await store.acquire(LIMITS, 100)
            latencies.append((time.perf_counter() - t0) * 1e6)
            async with store.lease(LIMITS):
                pass
            cycles += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "cycles_per_s": cycles / elapsed,
        "acquire_p50_us": pct(latencies, 0.5),
        "acquire_p99_us": pct(latencies, 0.99),
    }


async def measure(store, seconds: float, concurrency: int) -> dict:
    try:
        await sequential(store, 0.3)  # warm-up: connections, script cache
        seq = await sequential(store, seconds)
        conc = await concurrent(store, seconds, concurrency)
        return {"sequential": seq, "concurrent": conc}
    finally:
        await store.aclose()


async def ping_compare(url: str, seconds: float, concurrency: int) -> dict:
    """PING through redis-py's asyncio client vs the store's pipelined client (why resp.py exists)."""
    import redis.asyncio as aioredis

    from gateway_engine.quota.resp import RespClient

    async def run_pings(call) -> tuple[float, float]:
        await call()
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            await call()
            n += 1
        seq = n / seconds
        count, end = 0, time.perf_counter() + seconds

        async def worker():
            nonlocal count
            while time.perf_counter() < end:
                await call()
                count += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return seq, count / (time.perf_counter() - started)

    pyclient = aioredis.Redis.from_url(url)
    resp = RespClient(url)
    try:
        redis_py = await run_pings(lambda: pyclient.execute_command("PING"))
        ours = await run_pings(lambda: resp.call("PING"))
    finally:
        await pyclient.aclose()
        await resp.aclose()
    return {"redis_py": redis_py, "resp": ours}


def median_of(rounds: list[dict]) -> dict:
    return {
        part: {k: statistics.median(r[part][k] for r in rounds) for k in rounds[0][part]}
        for part in rounds[0]
    }


def cleanup(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="repeat and report the median of each figure")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()

    prefix = f"bgwbench:{uuid.uuid4().hex[:8]}:"
    redis_rounds, local_rounds = [], []
    try:
        for _ in range(args.rounds):
            store = RedisQuotaStore(
                args.redis_url, prefix=prefix, global_max_in_flight=64, cluster_max_in_flight=0
            )
            redis_rounds.append(asyncio.run(measure(store, args.seconds, args.concurrency)))
            local = LocalQuotaStore(global_max_in_flight=64)
            local_rounds.append(asyncio.run(measure(local, args.seconds, args.concurrency)))
    finally:
        cleanup(args.redis_url, prefix)
    redis_res, local_res = median_of(redis_rounds), median_of(local_rounds)
    pings = asyncio.run(ping_compare(args.redis_url, min(args.seconds, 1.0), args.concurrency))
    load = os.getloadavg()

    def row(name: str, r: dict) -> str:
        s, c = r["sequential"], r["concurrent"]
        return (
            f"| {name} | {s['cycles_per_s']:,.0f} | {c['cycles_per_s']:,.0f} | {s['acquire_p50_us'] / 1000:.3f} | "
            f"{s['acquire_p99_us'] / 1000:.3f} | {s['lease_p50_us'] / 1000:.3f} | {s['lease_p99_us'] / 1000:.3f} |"
        )

    seq = redis_res["sequential"]
    command = "bench/quota.py " + " ".join(sys.argv[1:])
    text = f"""## Quota engine (`bench/quota.py`)

Machine: {machine()}; `nproc` = {os.cpu_count()}. Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC.
Command: `.venv/bin/python {command.strip()}` (Redis {args.redis_url.split("@")[-1]}, same machine).
Median of {args.rounds} rounds of {args.seconds:g} s each; load average while running: {load[0]:.2f} (shared machine).

One process, one event loop; limits so high nothing waits, so this is the store's own cost. A *cycle*
is what the engine does per provider call: `acquire` (RPM+TPM buckets, one EVALSHA), then a lease
(`async with store.lease(...)`: lease script + ZREM on exit).

| store | cycles/s, sequential | cycles/s, {args.concurrency} concurrent | acquire p50 ms | acquire p99 ms | lease enter+exit p50 ms | lease p99 ms |
|---|---|---|---|---|---|---|
{row("Redis", redis_res)}
{row("in-process", local_res)}

Concurrent acquire latency (Redis, {args.concurrency} coroutines): p50 {redis_res["concurrent"]["acquire_p50_us"] / 1000:.3f} ms, p99 {redis_res["concurrent"]["acquire_p99_us"] / 1000:.3f} ms (includes waiting for the event loop).

Why the store has its own small pipelined client (`gateway_engine/quota/resp.py`): PINGs/s through
redis-py's asyncio client {pings["redis_py"][0]:,.0f} sequential / {pings["redis_py"][1]:,.0f} with {args.concurrency} concurrent callers;
through the store's client {pings["resp"][0]:,.0f} / {pings["resp"][1]:,.0f} (same run).

Goals: ≥ 5,000 acquire+release per second per process; acquire p50 ≤ 0.3 ms.
Met: throughput {"yes" if max(seq["cycles_per_s"], redis_res["concurrent"]["cycles_per_s"]) >= 5000 else "no"} (best of sequential/concurrent), p50 {"yes" if seq["acquire_p50_us"] <= 300 else "no"}.
"""
    print(text)
    if not args.no_write:
        replace_section(ROOT / "docs" / "benchmarks.md", "quota", text)
        print("written to docs/benchmarks.md")


if __name__ == "__main__":
    main()

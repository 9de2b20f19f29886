"""HTTP clients against the ~1 ms simulator (a separate process).

    .venv/bin/python bench/http_clients.py [--requests 1000]          # raw clients: req/s per pool size
    .venv/bin/python bench/http_clients.py --engine [--items 3000]    # the engine with each provider
                                                                       # transport; writes docs/benchmarks.md

The raw part prints req/s of httpx.AsyncClient at several pool sizes and of aiohttp. The engine part runs
CrossProviderBatcher (in-process quota store and breaker, provider max_concurrency 32) with
``EngineOptions(transport="aiohttp")`` and ``transport="httpx"`` in interleaved rounds and reports this
process's CPU time per item (user + system; the simulator runs in its own process) and items/s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
import httpx  # noqa: E402

from sim.testing import run_simulator_subprocess  # noqa: E402

BODY = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}


async def run_httpx(url: str, conc: int, n: int) -> float:
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(limits=limits) as client:
        sem = asyncio.Semaphore(conc)

        async def one():
            async with sem:
                (await client.post(url, json=BODY)).raise_for_status()

        await asyncio.gather(*(one() for _ in range(50)))
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - t0)


async def run_aiohttp(url: str, conc: int, n: int) -> float:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as session:
        sem = asyncio.Semaphore(conc)

        async def one():
            async with sem, session.post(url, json=BODY) as r:
                await r.read()
                r.raise_for_status()

        await asyncio.gather(*(one() for _ in range(50)))
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - t0)


def engine_round(url: str, transport: str, n: int) -> tuple[float, float]:
    """(CPU ms per item, items/s) of one engine run of n items with this transport."""
    from gateway_engine import CrossProviderBatcher, EngineOptions
    from gateway_engine.breaker import LocalBreaker
    from gateway_engine.quota.local import LocalQuotaStore
    from gateway_engine.routing import ProviderConfig, routing_table

    config = ProviderConfig.from_dict(
        {"name": "fast", "base_url": url, "model": "m", "rpm": 1_000_000, "tpm": 1_000_000,
         "burst_seconds": 60, "max_concurrency": 32, "timeout_seconds": 30}
    )  # fmt: skip
    batcher = CrossProviderBatcher(
        routing_table([config]), store=LocalQuotaStore(), breaker=LocalBreaker(),
        options=EngineOptions(transport=transport),
    )  # fmt: skip
    items = [{"custom_id": f"{transport}-{i}", "provider": "fast", "query": "ping", "params": {"max_tokens": 4}}
             for i in range(n)]  # fmt: skip
    cpu0, wall0 = time.process_time(), time.perf_counter()
    results = batcher.batch(items)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{transport}: {len(failed)} items failed, e.g. {failed[0]}")
    return 1000 * cpu / n, n / wall


def engine_part(items: int, rounds: int, write: bool) -> None:
    import statistics

    from bench.common import ROOT, git_rev, machine, replace_section

    runs: dict[str, list[tuple[float, float]]] = {"aiohttp": [], "httpx": []}
    with run_simulator_subprocess({"providers": {"fast": {"median_ms": 1, "sigma": 0}}}) as sim:
        url = sim.provider_url("fast")
        engine_round(url, "aiohttp", 200)  # warm-up
        for _ in range(rounds):
            for transport in ("aiohttp", "httpx"):
                runs[transport].append(engine_round(url, transport, items))
                print(transport, f"{runs[transport][-1][0]:.3f} ms CPU/item, {runs[transport][-1][1]:.0f} items/s",
                      flush=True)  # fmt: skip
    med = {
        t: (statistics.median(c for c, _ in r), statistics.median(s for _, s in r)) for t, r in runs.items()
    }
    lines = [
        "## Provider transports: the engine with aiohttp and with httpx (bench/http_clients.py --engine)",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; commit {git_rev()}",
        f"- machine: {machine()}",
        f"- command: `.venv/bin/python bench/http_clients.py --engine --items {items} --rounds {rounds}`",
        "- CrossProviderBatcher with the in-process quota store and breaker, one provider (max_concurrency 32) "
        "served by the simulator in its own process (median 1 ms); CPU is this process's user + system time, "
        "so the simulator's own CPU is not in it",
        "",
        "| transport | CPU ms per item (rounds) | median | items/s (median) |",
        "|---|---|---|---|",
    ]
    for transport, r in runs.items():
        lines.append(
            f"| {transport} | {', '.join(f'{c:.2f}' for c, _ in r)} | **{med[transport][0]:.2f}** "
            f"| {med[transport][1]:.0f} |"
        )
    ratio = med["httpx"][0] / med["aiohttp"][0]
    lines += ["", f"httpx costs **{ratio:.1f}x** the engine CPU per item of aiohttp here; aiohttp stays the "
              "default (`GATEWAY_PROVIDER_TRANSPORT=aiohttp`), httpx is selectable.", ""]  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if write:
        replace_section(ROOT / "docs" / "benchmarks.md", "transports", text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--engine", action="store_true", help="the engine with each provider transport")
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.engine:
        engine_part(args.items, args.rounds, not args.no_write)
        return 0
    with run_simulator_subprocess({"providers": {"fast": {"median_ms": 1}}}) as sim:
        url = sim.provider_url("fast") + "/chat/completions"
        for conc in (1, 8, 32, 64):
            print(
                f"httpx   concurrency {conc:>3}: {asyncio.run(run_httpx(url, conc, args.requests)):6.0f} req/s",
                flush=True,
            )
        for conc in (8, 64):
            print(
                f"aiohttp concurrency {conc:>3}: {asyncio.run(run_aiohttp(url, conc, args.requests)):6.0f} req/s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

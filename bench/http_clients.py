"""HTTP clients against the ~1 ms simulator (a separate process).

    .venv/bin/python bench/http_clients.py [--requests 1000]          # raw clients: req/s per pool size

Prints req/s of httpx.AsyncClient at several pool sizes and of aiohttp. (The engine once ran with either
as its provider transport, ``--engine``; its measurement, about 11x the CPU per item with httpx, is in
docs/benchmarks.md "Provider transports". aiohttp is the only one since issue #37.)
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args()
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

"""Cost of reading and cleaning provider answers in the engine's HTTP client (issue #13).

    .venv/bin/python bench/answer_cleaning.py [--calls 3000] [--concurrency 16]

Serves one answer shape from a local aiohttp server in a separate process (the broken provider of
tests/faults: "ok" is a normal ~300-byte completion, "nul" one with a NUL escape, which is walked and
cleaned) and times AiohttpProviderClient.chat in this process: calls per second and this process's
CPU milliseconds per call. Prints one line per mode (no docs are written).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway_engine.http import AiohttpProviderClient  # noqa: E402
from gateway_engine.routing import ProviderConfig  # noqa: E402
from tests.faults.server import broken_provider  # noqa: E402

MSG = [{"role": "user", "content": "ping"}]


async def run(url: str, calls: int, concurrency: int) -> tuple[float, float, int]:
    cfg = ProviderConfig.from_dict(
        {"name": "b", "base_url": url, "model": "m", "rpm": 1, "tpm": 1, "max_concurrency": concurrency,
         "timeout_seconds": 10}
    )  # fmt: skip
    client = AiohttpProviderClient(cfg)
    sem = asyncio.Semaphore(concurrency)
    ok = 0

    async def one() -> None:
        nonlocal ok
        async with sem:
            outcome = await client.chat(MSG)
        ok += outcome.ok

    await asyncio.gather(*(one() for _ in range(50)))  # warm the pool
    ok = 0
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await client.aclose()
    return calls / wall, cpu * 1000 / calls, ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with broken_provider() as server:
        for mode in ("ok", "nul"):
            rate, cpu_ms, ok = asyncio.run(run(server.url(mode), args.calls, args.concurrency))
            print(f"{mode:4s} calls/s {rate:8.0f}  client CPU ms/call {cpu_ms:6.3f}  ok {ok}/{args.calls}")


if __name__ == "__main__":
    main()

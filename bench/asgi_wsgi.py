"""Should the rest of the site (``/api/``, ``/v1/files|batches``, the admin) move to the ASGI server too?
The same requests against gunicorn (gateway_site.wsgi, the `make up` command before issue #22: 2 workers ×
4 threads) and uvicorn (gateway_site.asgi, 2 workers), interleaved in time, load from a separate process.

    .venv/bin/python bench/asgi_wsgi.py [--seconds 8] [--concurrency 16] [--rounds 2]

Needs DATABASE_URL / REDIS_URL with a migrated database; creates a team and key of its own. Prints one
markdown row per (server, path): requests/s, p50, p99, errors.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, free_port, git_rev, machine, utc_now  # noqa: E402

LOAD = r"""
import asyncio, json, sys, time
import aiohttp

async def main(url, key, seconds, concurrency):
    lat, errors = [], 0
    stop = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def one():
            nonlocal errors
            while time.monotonic() < stop:
                t = time.perf_counter()
                try:
                    async with s.get(url, headers=headers) as r:
                        await r.read()
                        ok = r.status < 400
                except Exception:
                    ok = False
                if ok:
                    lat.append(time.perf_counter() - t)
                else:
                    errors += 1
        await asyncio.gather(*(one() for _ in range(concurrency)))
    print(json.dumps({"n": len(lat), "errors": errors, "lat": sorted(lat)}))

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])))
"""

SERVERS = {
    "uvicorn (ASGI, Django's ASGI handler for every path), 2 workers": [
        "-m",
        "uvicorn",
        "gateway_site.asgi:application",
        "--workers",
        "2",
        "--log-level",
        "warning",
        "--host",
        "127.0.0.1",
        "--port",
    ],  # fmt: skip
    "gunicorn (WSGI), 2 workers × 4 threads": [
        "-m",
        "gunicorn",
        "gateway_site.wsgi:application",
        "-w",
        "2",
        "--threads",
        "4",
        "-b",
    ],  # fmt: skip
    "uvicorn (ASGI: async lane + the WSGI app on GATEWAY_ASGI_THREADS=4 threads), 2 workers": [
        "-m",
        "uvicorn",
        "gateway_site.asgi:application",
        "--workers",
        "2",
        "--log-level",
        "warning",
        "--host",
        "127.0.0.1",
        "--port",
    ],  # fmt: skip
}
PATHS = {"/api/v1/batches?limit=10": "the REST API (sync DRF view)", "/admin/login/": "the admin (sync view, HTML)",
         "/v1/models": "the interactive lane (async view)"}  # fmt: skip


def key_for_bench() -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", "create_team", "asgi-bench"], cwd=ROOT, capture_output=True
    )
    del out
    out = subprocess.run([sys.executable, "manage.py", "create_api_key", "--team", "asgi-bench"], cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def serve(name: str, port: int) -> subprocess.Popen:
    args = SERVERS[name] + ([f"127.0.0.1:{port}"] if "gunicorn" in name else [str(port)])
    env = {
        **os.environ,
        "DJANGO_LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "gateway_site.settings.local",
        "DJANGO_DEBUG": "0",
        "GATEWAY_API_THROTTLE_RATE": "1000000/min",
    }
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{name} did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    key = key_for_bench()
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for name in SERVERS:
            port = free_port()
            proc = serve(name, port)
            try:
                for path in PATHS:
                    out = subprocess.run([sys.executable, "-c", LOAD, f"http://127.0.0.1:{port}{path}", key,
                                          str(args.seconds), str(args.concurrency)],
                                         capture_output=True, text=True, check=True)  # fmt: skip
                    results.setdefault((name, path), []).append(json.loads(out.stdout))
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(40)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
    print(f"- date: {utc_now()}; commit {git_rev()}\n- machine: {machine()}")
    print(
        f"- command: `.venv/bin/python bench/asgi_wsgi.py --seconds {args.seconds:g} --concurrency "
        f"{args.concurrency} --rounds {args.rounds}` (servers interleaved, load from a separate process)\n"
    )
    print("| server | path | requests/s | p50 (ms) | p99 (ms) | errors |\n|---|---|---|---|---|---|")
    for (name, path), runs in results.items():
        lat = sorted(x for r in runs for x in r["lat"])
        n, errors = sum(r["n"] for r in runs), sum(r["errors"] for r in runs)

        def p(q: float, lat: list[float] = lat) -> float:
            return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")

        print(
            f"| {name} | `{path}` ({PATHS[path]}) | {n / (args.seconds * len(runs)):.0f} | {p(0.5):.1f} | "
            f"{p(0.99):.1f} | {errors} |"
        )


if __name__ == "__main__":
    main()

"""Gateway overhead against a ~1 ms simulated provider with quotas out of the way.

    .venv/bin/python bench/overhead.py                       # all parts, writes docs/benchmarks.md
    .venv/bin/python bench/overhead.py --items 10000 --workers 2

Parts:
  latency    per-call time, sequential (one call in flight): direct httpx call vs the engine
             (CrossProviderBatcher, in-process quota store, provider max_concurrency=1); "added" is
             engine per-call wall time minus direct per-call wall time (p50 of the item latencies too)
  throughput end-to-end items/s through REST -> Celery (Redis + PostgreSQL, --workers workers)
             -> provider: POST of --items items until the batch is terminal; also single-process mode.
             Workers: `celery -A gateway_site worker`, Celery's default prefork pool and concurrency,
             unless --worker-concurrency / --worker-pool say otherwise (--worker-concurrency 1: the
             setting of the figures before issue #19). Each run also reports what the provider saw per
             custom id (the simulator's request counts): requests beyond one per id, against the
             requests the batch's stats counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench.common import (  # noqa: E402
    ROOT,
    add_output_args,
    command_line,
    load_average,
    pct,
    provider_requests,
    replace_section,
    report_header,
    run_meta,
)
from bench.stack import add_worker_args  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

SIM_CFG = {"providers": {"fast": {"model": "fast-1ms", "median_ms": 1, "sigma": 0, "completion_tokens": 4}}}
HUGE = 1_000_000  # the largest rpm/tpm the provider loader accepts


def provider_file(base_url: str, concurrency: int) -> dict:
    return {
        "providers": [
            {"name": "fast", "base_url": f"{base_url}/fast/v1", "model": "fast-1ms", "rpm": HUGE, "tpm": HUGE,
             "max_concurrency": concurrency, "burst_seconds": 60, "timeout_seconds": 30, "max_retries": 3,
             "enabled": True},
        ],
        "routes": [{"route": "echo", "provider": "fast", "priority": 0, "weight": 1}],
    }  # fmt: skip


def items(n: int) -> list[dict]:
    return [
        {"custom_id": f"i{i}", "route": "echo", "query": f"ping {i}", "params": {"max_tokens": 4}}
        for i in range(n)
    ]


def direct_latency(sim_url: str, n: int) -> dict:
    body = {"model": "fast-1ms", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    url = f"{sim_url}/fast/v1/chat/completions"
    samples = []

    async def run():
        async with httpx.AsyncClient() as client:
            for _ in range(20):  # warm the connection
                await client.post(url, json=body)
            t0 = time.perf_counter()
            for _ in range(n):
                s = time.perf_counter()
                r = await client.post(url, json=body)
                r.json()
                samples.append((time.perf_counter() - s) * 1000)
            return time.perf_counter() - t0

    wall = asyncio.run(run())
    return {"n": n, "p50_ms": pct(samples, 0.5), "p95_ms": pct(samples, 0.95), "per_call_ms": wall * 1000 / n}


def engine_latency(sim_url: str, n: int) -> dict:
    from gateway_engine import CrossProviderBatcher

    batcher = CrossProviderBatcher.from_config(provider_file(sim_url, 1), global_max_in_flight=1)
    batcher.batch(items(20))  # warm-up (imports, pools)
    batcher = CrossProviderBatcher.from_config(provider_file(sim_url, 1), global_max_in_flight=1)
    t0 = time.perf_counter()
    results = batcher.batch(items(n))
    wall = time.perf_counter() - t0
    lat = [r.latency_ms for r in results if r.ok and r.latency_ms is not None]
    return {
        "n": n,
        "ok": sum(1 for r in results if r.ok),
        "per_call_ms": wall * 1000 / n,
        "item_latency_p50_ms": pct(lat, 0.5),
        "item_latency_p95_ms": pct(lat, 0.95),
    }


def latency_rounds(sim_url: str, calls: int, rounds: int) -> dict:
    """Direct and engine runs interleaved (the machine's load drifts); medians over the rounds."""
    per = max(1, calls // rounds)
    directs, engines = [], []
    for r in range(rounds):
        directs.append(direct_latency(sim_url, per))
        engines.append(engine_latency(sim_url, per))
        print(f"round {r + 1}: direct {directs[-1]['per_call_ms']:.2f} ms/call, "
              f"engine {engines[-1]['per_call_ms']:.2f} ms/call", flush=True)  # fmt: skip

    def med(rows, key):
        values = [row[key] for row in rows if row[key] is not None]
        return statistics.median(values) if values else None

    direct = {k: med(directs, k) for k in ("p50_ms", "p95_ms", "per_call_ms")}
    engine = {k: med(engines, k) for k in ("per_call_ms", "item_latency_p50_ms", "item_latency_p95_ms")}
    direct["n"] = engine["n"] = per * rounds
    engine["ok"] = sum(e["ok"] for e in engines)
    added = [e["per_call_ms"] - d["per_call_ms"] for d, e in zip(directs, engines, strict=True)]
    return {"direct": direct, "engine": engine, "added_per_call_ms": added, "rounds": rounds}


CPU_GROUPS = (  # (label, substring of /proc/<pid>/cmdline), first match wins
    ("celery workers", "celery"),
    ("web (gunicorn/runserver)", "gunicorn"),
    ("web (gunicorn/runserver)", "runserver"),
    ("simulator", "-m sim"),
    ("redis", "redis-server"),
    ("postgres", "postgres"),
    ("bench driver", "overhead.py"),
)


def cpu_snapshot() -> tuple[float, dict[int, tuple[str, float]]]:
    """(machine-wide busy CPU seconds from /proc/stat, {pid: (group, utime+stime seconds)})."""
    hz = os.sysconf("SC_CLK_TCK")
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    busy = (sum(ticks[:8]) - ticks[3] - ticks[4]) / hz  # all but idle and iowait (guest is in user)
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        group = next((label for label, key in CPU_GROUPS if key in cmd), "other processes")
        procs[int(entry)] = (group, (int(stat[11]) + int(stat[12])) / hz)
    return busy, procs


def cpu_between(before, after, wall: float) -> dict:
    """CPU seconds per process group between two snapshots; "not attributed" = machine busy time not
    seen in a live process (processes that exited in between, e.g. PostgreSQL backends, and kernel)."""
    groups: dict[str, float] = {}
    for pid, (group, t) in after[1].items():
        base = before[1].get(pid, (group, 0.0))[1]
        if t - base > 0:
            groups[group] = groups.get(group, 0.0) + t - base
    busy = after[0] - before[0]
    groups["not attributed"] = max(0.0, busy - sum(groups.values()))
    cores = os.cpu_count() or 1
    return {"wall_s": wall, "available_s": wall * cores, "busy_s": busy, "groups": groups}


def throughput(
    sim_url: str,
    n: int,
    workers: int,
    logdir: Path,
    concurrency: int,
    mode: str = "shared",
    worker_concurrency: int | None = None,
    worker_pool: str | None = None,
    sim=None,
) -> dict:
    from bench.stack import GatewayStack

    with GatewayStack(
        mode, provider_file(sim_url, concurrency), logdir / mode, workers=workers,
        worker_concurrency=worker_concurrency, worker_pool=worker_pool,
    ) as gw:  # fmt: skip
        if sim is not None:
            sim.reset()  # request counts of this run only
        before, t0 = cpu_snapshot(), time.monotonic()
        batch, wall = gw.run_batch(items(n), timeout=1800, poll=0.2)
        cpu = cpu_between(before, cpu_snapshot(), time.monotonic() - t0)
        stats = batch.get("stats") or {}
        sent = provider_requests(sim.request_counts(), [batch]) if sim is not None else None
        return {
            "pool": gw.pool_label if mode == "shared" else None,
            "provider_requests": sent,
            "loadavg": load_average(),
            "n": n,
            "mode": mode,
            "workers": workers if mode == "shared" else 0,
            "status": batch["status"],
            "ok": stats.get("success_count"),
            "wall_s": wall,
            "items_per_s": n / wall,
            "cpu": cpu,
        }


def render(res: dict, meta: dict) -> str:
    lines = [
        *report_header("Overhead: the gateway against a ~1 ms provider", meta),
        f"- provider max_concurrency {meta['provider_concurrency']} (cluster-wide leases; each engine run "
        "has 2 × that many dispatchers per provider, at most max_concurrency of them past the local gate)",
        "- provider: simulator, median 1 ms, no rate limits in the simulator (gateway rpm/tpm 10^6, far above the rates reached)",
        "",
    ]
    d, e, t = res.get("direct"), res.get("engine"), res.get("throughput")
    if d and e:
        added = statistics.median(res["added_per_call_ms"])
        lines += [
            "| sequential calls (medians over rounds) | n | per call (wall/n) ms | p50 ms | p95 ms |",
            "|---|---|---|---|---|",
            f"| direct httpx.AsyncClient | {d['n']} | {d['per_call_ms']:.2f} | {d['p50_ms']:.2f} | {d['p95_ms']:.2f} |",
            f"| engine (CrossProviderBatcher, in-process store, 1 in flight) | {e['n']} | {e['per_call_ms']:.2f} "
            f"| {e['item_latency_p50_ms']} (item latency_ms) | {e['item_latency_p95_ms']} (item latency_ms) |",
            "",
            f"Added latency per call (engine wall/n − direct wall/n, median of {res['rounds']} interleaved "
            f"rounds: {', '.join(f'{a:+.2f}' for a in res['added_per_call_ms'])}): **{added:.2f} ms** "
            f"(goal ≤ 1 ms p50). Item latency_ms − direct p50: "
            f"{(e['item_latency_p50_ms'] or 0) - d['p50_ms']:.2f} ms at p50, "
            f"{(e['item_latency_p95_ms'] or 0) - d['p95_ms']:.2f} ms at p95 "
            "(latency_ms is whole milliseconds).",
            "",
        ]
    if t:
        lines += [
            "| end-to-end REST → Celery → provider | items | workers | ok | wall s | items/s "
            "| provider requests (beyond one per id; stats count) |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in t:
            label = "Redis + PostgreSQL" if row["mode"] == "shared" else "single process (SQLite, eager)"
            workers = f"{row['workers']} ({row['pool']})" if row.get("pool") else (row["workers"] or "–")
            d = row.get("provider_requests")
            sent = f"{d['requests']} ({d['duplicates']}; {d['gateway_requests']})" if d else "–"
            lines.append(
                f"| {label} | {row['n']} | {workers} | {row['ok']} | {row['wall_s']:.1f} "
                f"| **{row['items_per_s']:.0f}** | {sent} |"
            )
        lines += [
            "",
            "Goal ≥ 1,000 items/s on this 2-core machine (web server, workers, PostgreSQL, Redis and the "
            "simulator share the two cores).",
            "",
        ]
        for row in t:
            cpu = row.get("cpu")
            if not cpu:
                continue
            label = "Redis + PostgreSQL" if row["mode"] == "shared" else "single process"
            parts = ", ".join(
                f"{name} {sec:.1f} s ({100 * sec / cpu['available_s']:.0f} %)"
                for name, sec in sorted(cpu["groups"].items(), key=lambda kv: -kv[1])
                if sec >= 0.05
            )
            lines.append(
                f"CPU during the {label} run (POST to terminal, {cpu['wall_s']:.1f} s wall = "
                f"{cpu['available_s']:.1f} CPU-s on {os.cpu_count()} cores; busy {cpu['busy_s']:.1f} s = "
                f"{100 * cpu['busy_s'] / cpu['available_s']:.0f} %): {parts}; per item "
                f"{1000 * cpu['busy_s'] / row['n']:.2f} ms of machine CPU."
            )
            lines.append("")
    if res.get("errors"):
        lines += ["Errors: " + "; ".join(res["errors"]), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="latency,throughput")
    ap.add_argument("--calls", type=int, default=1000, help="sequential calls for the latency part")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved direct/engine rounds")
    ap.add_argument("--items", type=int, default=10000, help="batch size for the throughput part")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", default="shared,single", help="gateway modes for the throughput part")
    ap.add_argument("--provider-concurrency", type=int, default=32)
    add_worker_args(ap)
    add_output_args(ap)
    args = ap.parse_args(argv)
    from bench.stack import exit_cleanly_on_sigterm

    exit_cleanly_on_sigterm()
    parts = set(args.parts.split(","))
    logdir = ROOT / "var" / "bench" / "overhead"
    logdir.mkdir(parents=True, exist_ok=True)
    res: dict = {"errors": []}
    with run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
        if "latency" in parts:
            try:
                res.update(latency_rounds(sim.base_url, args.calls, args.rounds))
            except Exception as exc:  # noqa: BLE001
                res["errors"].append(f"latency: {exc!r}"[:300])
        res["throughput"] = []
        for mode in args.modes.split(","):
            if "throughput" not in parts:
                break
            try:
                row = throughput(
                    sim.base_url, args.items, args.workers, logdir, args.provider_concurrency, mode,
                    args.worker_concurrency, args.worker_pool, sim,
                )  # fmt: skip
                res["throughput"].append(row)
                print("throughput", json.dumps(row), flush=True)
            except Exception as exc:  # noqa: BLE001
                res["errors"].append(f"throughput ({mode}): {exc!r}"[:300])
        for err in res["errors"]:
            print("ERROR", err, flush=True)
        counters = sim.counters()["totals"]
        print("simulator totals", json.dumps(counters), flush=True)
    meta = run_meta(
        command_line("bench/overhead.py", argv),
        provider_concurrency=args.provider_concurrency,
        worker_concurrency=args.worker_concurrency,
        worker_pool=args.worker_pool,
    )
    (logdir / "overhead.json").write_text(json.dumps({"meta": meta, **res}, indent=1))
    if not args.no_write:
        replace_section(Path(args.out), "overhead", render(res, meta))
        print(f"wrote {args.out}")
    return 0 if not res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())

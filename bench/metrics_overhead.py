"""Cost of the observability layer: bench/overhead.py's end-to-end throughput with metrics on and off.

    .venv/bin/python bench/metrics_overhead.py                 # 3 interleaved runs each, writes docs/benchmarks.md
    .venv/bin/python bench/metrics_overhead.py --items 5000 --runs 3

on:  PROMETHEUS_MULTIPROC_DIR set (web and workers write the multiprocess files), the engine observer
     installed (counters, histograms, failed-item events); /metrics is scraped once per second during
     the run, as Prometheus would
off: GATEWAY_METRICS_ENABLED=0, no multiprocess directory
Runs alternate on/off so drifting background load hits both alike; the median of each is compared.

    .venv/bin/python bench/metrics_overhead.py --parts latency   # the engine alone, per provider call

latency: sequential calls through CrossProviderBatcher (in-process store, 1 in flight) with the gateway's
observer (multiprocess files in a temp dir) and without, interleaved rounds; the difference per call is
the observer's cost on the hot path, free of the end-to-end run's noise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench.common import (  # noqa: E402
    ROOT,
    add_output_args,
    command_line,
    replace_section,
    report_header,
    run_meta,
)
from bench.overhead import SIM_CFG, cpu_between, cpu_snapshot, items, provider_file  # noqa: E402
from bench.stack import add_worker_args, pool_label  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402


def one_run(
    sim_url: str,
    n: int,
    workers: int,
    concurrency: int,
    metrics: bool,
    logdir: Path,
    pool: tuple = (None, None),
) -> dict:
    """pool: (worker_pool, worker_concurrency) for GatewayStack; (None, None) = Celery's defaults."""
    from bench.stack import GatewayStack

    env = {"GATEWAY_METRICS_ENABLED": "1" if metrics else "0"}
    prom_dir = logdir / "prom"
    shutil.rmtree(prom_dir, ignore_errors=True)
    if metrics:
        prom_dir.mkdir(parents=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(prom_dir)
    name = "on" if metrics else "off"
    with GatewayStack("shared", provider_file(sim_url, concurrency), logdir / name, workers=workers,
                      worker_pool=pool[0], worker_concurrency=pool[1], extra_env=env) as gw:  # fmt: skip
        stop = threading.Event()
        scrapes = []

        def scrape() -> None:
            while not stop.wait(1.0):
                try:
                    r = httpx.get(f"{gw.url}/metrics", timeout=5)
                    scrapes.append((r.status_code, len(r.content)))
                except httpx.HTTPError:
                    scrapes.append((0, 0))

        scraper = threading.Thread(target=scrape, daemon=True)
        if metrics:
            scraper.start()
        before, t0 = cpu_snapshot(), time.monotonic()
        batch, wall = gw.run_batch(items(n), timeout=1800, poll=0.2)
        cpu = cpu_between(before, cpu_snapshot(), time.monotonic() - t0)
        stop.set()
        if metrics:
            scraper.join(5)
            final = httpx.get(f"{gw.url}/metrics", timeout=10).text
            requests = sum(
                float(line.rsplit(" ", 1)[1])
                for line in final.splitlines()
                if line.startswith("gateway_provider_requests_total{")
            )
        else:
            requests = None
        children = gw.worker_children
    return {
        "metrics": name,
        "n": n,
        "status": batch["status"],
        "ok": (batch.get("stats") or {}).get("success_count"),
        "wall_s": wall,
        "items_per_s": n / wall,
        "cpu_busy_s": cpu["busy_s"],
        "scrapes": len(scrapes),
        "scrapes_ok": sum(1 for code, _ in scrapes if code == 200),
        "requests_counted": requests,
        "pool_children": children,
    }


def engine_per_call_ms(sim_url: str, n: int, observed: bool) -> float:
    from gateway_engine import CrossProviderBatcher
    from observability.engine import GatewayObserver

    def batcher():
        observer = GatewayObserver("bench", "bench") if observed else None
        return CrossProviderBatcher.from_config(
            provider_file(sim_url, 1), global_max_in_flight=1, observer=observer
        )

    batcher().batch(items(20))  # warm-up
    b = batcher()
    t0 = time.perf_counter()
    results = b.batch(items(n))
    assert all(r.ok for r in results)
    return (time.perf_counter() - t0) * 1000 / n


def latency_part(sim_url: str, calls: int, rounds: int) -> dict:
    per = max(1, calls // rounds)
    on, off = [], []
    for r in range(rounds):
        pair = [(True, on), (False, off)] if r % 2 == 0 else [(False, off), (True, on)]
        for observed, out in pair:
            out.append(engine_per_call_ms(sim_url, per, observed))
        print(f"round {r + 1}: on {on[-1]:.3f} ms/call, off {off[-1]:.3f} ms/call", flush=True)
    return {"calls_per_round": per, "rounds": rounds, "on": on, "off": off}


def observer_cost_us(n: int = 20000) -> dict:
    """CPU time of the observer calls one item costs (1 quota wait, 1 attempt with tokens and cost,
    1 item done), in a tight loop: the exact hot-path price, free of scheduling noise."""
    from gateway_engine.items import ItemResult
    from observability.engine import GatewayObserver
    from providers.pricing import Prices

    observer = GatewayObserver("bench", "team-a", prices={"fast": Prices(1, 2)})
    result = ItemResult("i", "succeeded", provider="fast", attempts=1)

    def one() -> None:
        observer.on_quota_wait("fast", 0.001)
        observer.on_attempt("fast", error_type="", status_code=200, latency_s=0.002, prompt_tokens=12,
                            completion_tokens=4, used=True, custom_id="i", attempt=1)  # fmt: skip
        observer.on_item_done(result)

    for _ in range(1000):
        one()
    best = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            one()
        best.append((time.process_time() - t0) * 1e6 / n)
    return {"per_item_us": min(best), "runs_us": best, "n": n}


def render_latency(res: dict, meta: dict) -> str:
    on, off = statistics.median(res["on"]), statistics.median(res["off"])
    return "\n".join(
        [
            *report_header("Observability overhead per provider call (engine only)", meta),
            f"- {res['rounds']} interleaved rounds of {res['calls_per_round']} sequential calls (1 in flight) "
            "through CrossProviderBatcher against the ~1 ms simulated provider; on = the gateway's observer "
            "writing Prometheus multiprocess files, off = no observer",
            f"- {meta['note']}",
            "",
            "| observer | per call ms (each round) | median |",
            "|---|---|---|",
            f"| on | {', '.join(f'{v:.3f}' for v in res['on'])} | **{on:.3f}** |",
            f"| off | {', '.join(f'{v:.3f}' for v in res['off'])} | **{off:.3f}** |",
            "",
            f"Added per call: **{on - off:+.3f} ms** ({100 * (on - off) / off:+.1f} % of the call): below the "
            "round-to-round noise of this shared machine.",
            "",
            f"Observer CPU per item in a tight loop (1 quota wait + 1 attempt with tokens and cost + 1 item "
            f"done, multiprocess files; best of {len(res['micro']['runs_us'])} × {res['micro']['n']}): "
            f"**{res['micro']['per_item_us']:.1f} µs** (runs: "
            f"{', '.join(f'{v:.1f}' for v in res['micro']['runs_us'])}).",
            "",
        ]
    )


def render(rows: list[dict], meta: dict) -> str:
    on = [r for r in rows if r["metrics"] == "on"]
    off = [r for r in rows if r["metrics"] == "off"]
    med_on = statistics.median(r["items_per_s"] for r in on)
    med_off = statistics.median(r["items_per_s"] for r in off)
    cpu_on = statistics.median(r["cpu_busy_s"] for r in on)
    cpu_off = statistics.median(r["cpu_busy_s"] for r in off)
    lines = [
        *report_header("Observability overhead: metrics on vs off", meta),
        "- workload: bench/overhead.py's end-to-end throughput (REST → Celery with "
        f"{meta['workers']} workers ({meta.get('pool', 'prefork pool, -c 1')}), Redis + PostgreSQL → ~1 ms "
        f"simulated provider), {meta['items']} items per run",
        "- on: multiprocess metrics files + engine observer, /metrics scraped every second during the run; "
        "off: GATEWAY_METRICS_ENABLED=0",
        f"- {meta['note']}",
        "",
        "| run | metrics | items/s | wall s | machine CPU busy s | scrapes ok | requests counted |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        counted = "–" if r["requests_counted"] is None else f"{r['requests_counted']:.0f}"
        scrapes = "–" if r["metrics"] == "off" else f"{r['scrapes_ok']}/{r['scrapes']}"
        lines.append(
            f"| {i} | {r['metrics']} | {r['items_per_s']:.0f} | {r['wall_s']:.1f} | {r['cpu_busy_s']:.1f} "
            f"| {scrapes} | {counted} |"
        )
    lines += [
        "",
        f"Median items/s: on **{med_on:.0f}**, off **{med_off:.0f}** → throughput cost "
        f"**{100 * (med_off - med_on) / med_off:+.1f} %** (goal ≤ 5 %); median machine CPU per run: on "
        f"{cpu_on:.1f} s, off {cpu_off:.1f} s ({100 * (cpu_on - cpu_off) / cpu_off:+.1f} %).",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="throughput", help="throughput,latency")
    ap.add_argument("--calls", type=int, default=3000, help="sequential calls for the latency part")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each (on and off, interleaved)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--provider-concurrency", type=int, default=32)
    ap.add_argument("--note", default="other engineers' test suites were running on the same 2 cores")
    add_worker_args(ap)
    add_output_args(ap)
    args = ap.parse_args(argv)
    from bench.stack import exit_cleanly_on_sigterm

    exit_cleanly_on_sigterm()
    logdir = ROOT / "var" / "bench" / "metrics_overhead"
    logdir.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    rows, latency = [], None
    if "latency" in parts:  # before prometheus_client is imported: this process writes multiprocess files
        prom_dir = logdir / "prom-latency"
        shutil.rmtree(prom_dir, ignore_errors=True)
        prom_dir.mkdir(parents=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(prom_dir)
    with run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
        if "latency" in parts:
            latency = latency_part(sim.base_url, args.calls, args.rounds)
            latency["micro"] = observer_cost_us()
        for i in range(args.runs if "throughput" in parts else 0):
            for metrics in (True, False) if i % 2 == 0 else (False, True):
                row = one_run(
                    sim.base_url, args.items, args.workers, args.provider_concurrency, metrics, logdir,
                    (args.worker_pool, args.worker_concurrency),
                )  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
    meta = run_meta(
        command_line("bench/metrics_overhead.py", argv),
        workers=args.workers,
        items=args.items,
        note=args.note,
        pool=pool_label(
            args.worker_pool, args.worker_concurrency, rows[0].get("pool_children") if rows else None
        ),
    )
    (logdir / f"metrics_overhead_{'_'.join(sorted(parts))}.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "latency": latency}, indent=1)
    )
    if rows:
        text = render(rows, meta)
        print(text)
        if not args.no_write:
            replace_section(Path(args.out), "overhead-metrics", text)
    if latency:
        text = render_latency(latency, meta)
        print(text)
        if not args.no_write:
            replace_section(Path(args.out), "overhead-metrics-latency", text)
    return 0 if all(r["status"] == "completed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

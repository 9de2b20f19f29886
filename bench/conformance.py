"""The conformance margin's effect and cost: the seed workload with the provider's buckets EQUAL to the
gateway's (the simulator's burst = the gateway's 1 s, not 1.3 s as in bench/seed_workload.py).

    .venv/bin/python bench/conformance.py                          # margins 0 and 0.25 s, 1/2/4 workers
    .venv/bin/python bench/conformance.py --margins 0.25 --workers 2

For each (margin, workers): PostgreSQL + Redis + N Celery workers (bench/stack.py), the 900-call seed
workload; reports items ok, wall, efficiency = t_min / wall (t_min from the provider's limits), and the
429s the simulator answered. Writes the "conformance-margin" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    SHARED_MACHINE,
    add_output_args,
    bench_sim_config,
    burst_report,
    command_line,
    load_average,
    provider_requests,
    quota_floor,
    report_header,
    run_meta,
    save_and_publish,
    seed_items,
    sim_summary,
    utc_now,
)
from bench.stack import add_worker_args  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

GATEWAY_BURST_S = 1.0  # bench/common.gateway_providers: every provider's burst_seconds


def equal_bucket_sim_config(time_scale: float) -> dict:
    cfg = bench_sim_config(time_scale)
    for p in cfg["providers"].values():
        p["burst_seconds"] = GATEWAY_BURST_S * time_scale  # simulated seconds: = 1 real second
    return cfg


def run_one(
    sim, sim_cfg: dict, items: list[dict], margin: float, workers: int, logdir: Path, t_min: float,
    pool: tuple = (None, None),
):  # fmt: skip
    """pool: (worker_pool, worker_concurrency) for GatewayStack; (None, None) = Celery's defaults."""
    from bench.common import gateway_providers
    from bench.stack import GatewayStack

    providers = gateway_providers(sim_cfg, sim.base_url)
    extra = {
        "GATEWAY_QUOTA_JITTER_MARGIN_SECONDS": str(margin),
        # a queue of our own: other benchmark runs on the same Redis database never take our tasks
        "CELERY_TASK_DEFAULT_QUEUE": f"bench-conformance-{secrets.token_hex(4)}",
    }
    db = "postgres://postgres@127.0.0.1:5432/gateway_bench_limits"
    with GatewayStack(
        "shared",
        providers,
        logdir / f"m{margin}-w{workers}",
        workers=workers,
        worker_pool=pool[0],
        worker_concurrency=pool[1],
        database_url=db,
        extra_env=extra,
    ) as gw:
        sim.reset()
        batch, wall = gw.run_batch(items)
        label = gw.pool_label
    sent = provider_requests(sim.request_counts(), [batch])
    counters = sim.counters()
    s = sim_summary(counters)
    stats = batch.get("stats") or {}
    ok = int(stats.get("success_count") or 0)
    return {
        "margin": margin,
        "workers": workers,
        "items_ok": ok,
        "items": len(items),
        "wall_s": wall,
        "t_min_s": t_min,
        "efficiency": t_min / wall if ok == len(items) else None,
        "sim_429": s["429s"],
        "sim_5xx": s["5xx"],
        "burst": burst_report(sim.trace(), sim_cfg, providers),
        "run_at": utc_now(),
        "pool": label,
        "provider_requests": sent,
        "loadavg": load_average(),
    }


def render(rows: list[dict], meta: dict) -> str:
    lines = [
        *report_header("Conformance margin: provider buckets equal to the gateway's", meta, SHARED_MACHINE),
        f"- workload: the seed workload ({meta['items']} calls, bench/seed_workload.py), simulator "
        f"examples/sim.json at time_scale {meta['time_scale']:g} with every provider's bucket = the gateway's "
        f"(burst 1 real s on both sides; bench/seed_workload.py gives the provider 1.3 s); t_min = "
        f"{meta['t_min']:.2f} s from the provider's limits",
        "- margin = `GATEWAY_QUOTA_JITTER_MARGIN_SECONDS`: seconds of refill taken off the gateway's burst "
        "capacity (the refill rate is unchanged)",
        "",
        "| margin (s) | Celery workers | items ok | wall (s) | efficiency t_min/wall | 429s at provider | 5xx "
        "| provider requests beyond one per id |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        eff = "n/a" if r["efficiency"] is None else f"{r['efficiency']:.3f}"
        d = r.get("provider_requests")
        dup = f"{d['duplicates']} ({d['gateway_retries']} retries)" if d else "–"
        workers = f"{r['workers']} ({r['pool']})" if r.get("pool") else r["workers"]
        lines.append(
            f"| {r['margin']:g} | {workers} | {r['items_ok']}/{r['items']} | {r['wall_s']:.1f} | {eff} "
            f"| {r['sim_429']} | {r['sim_5xx']} | {dup} |"
        )
    lines += ["", "Notes (peak burst at the provider, requests − rate × window):"]
    lines += [f"- margin {r['margin']:g}, {r['workers']} workers: {r['burst']}" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--margins", default="0,0.25")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--time-scale", type=float, default=10.0)
    add_worker_args(ap)
    add_output_args(ap)
    args = ap.parse_args(argv)
    from bench.stack import exit_cleanly_on_sigterm

    exit_cleanly_on_sigterm()
    sim_cfg = equal_bucket_sim_config(args.time_scale)
    items = seed_items(args.users)
    floor = quota_floor(sim_cfg, items)
    logdir = ROOT / "var" / "bench" / "conformance"
    logdir.mkdir(parents=True, exist_ok=True)
    command = command_line("bench/conformance.py", argv)
    rows = []
    with run_simulator_subprocess(sim_cfg, log_path=logdir / "sim.log") as sim:
        for margin in [float(m) for m in args.margins.split(",")]:
            for workers in [int(w) for w in args.workers.split(",")]:
                print(f"margin {margin:g} s, {workers} workers ...", flush=True)
                row = run_one(
                    sim, sim_cfg, items, margin, workers, logdir, floor["t_min"],
                    (args.worker_pool, args.worker_concurrency),
                )  # fmt: skip
                print(f"   {json.dumps({k: v for k, v in row.items() if k != 'burst'})}", flush=True)
                rows.append(row)
    meta = run_meta(command, items=len(items), time_scale=args.time_scale, t_min=floor["t_min"])
    save_and_publish(logdir / "results.json", meta, rows, args, "conformance-margin", render(rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""POST → first provider request: how long a new batch waits before its first request leaves (issue #19).

    .venv/bin/python bench/first_request.py                      # 3 / 900 / 10,000 items, idle and cold
    .venv/bin/python bench/first_request.py --sizes 3 --reps 5 --modes idle --no-write

Stack: bench.stack.GatewayStack "shared" (gunicorn + --workers × `celery -A gateway_site worker`, Celery's
default prefork pool and concurrency unless --worker-concurrency / --worker-pool say otherwise; PostgreSQL +
Redis) against the simulator in its own process (one provider, ~1 ms, no limits of its own; the gateway's
rpm/tpm 10^6). Two situations, per size and repetition:

  cold  the workers are stopped (warm shutdown) and started again; the batch is POSTed the moment every
        worker is ready (its readiness heartbeat — written on Celery's worker_ready signal, what /readyz
        reads — is in Redis)
  idle  the same workers after --idle-seconds without work (the previous batch finished)

Measured on one clock (CLOCK_MONOTONIC is shared by the processes of the host): the simulator is reset just
before the POST, so its trace's arrival_s (seconds since the reset, on its event loop's clock = monotonic)
places the first request that reached the provider. *first request* = that arrival − the moment the bench
started sending the POST (JSON body already built); *201* = when the POST's answer arrived (the first
request may leave before it: dispatch is queued when the submission commits). Each batch is waited for
until it is terminal before the next step. Goal (issue #19): ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    add_output_args,
    command_line,
    fmt_s,
    load_average,
    provider_requests,
    report_header,
    run_meta,
    save_and_publish,
)
from bench.overhead import provider_file  # noqa: E402
from bench.stack import TERMINAL, GatewayStack, add_worker_args, exit_cleanly_on_sigterm  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

SIM_CFG = {
    "trace_tag_regex": r"^(r\d+):",
    "providers": {"fast": {"model": "fast-1ms", "median_ms": 1, "sigma": 0, "completion_tokens": 4}},
}
GOAL_S = 0.5


def items(n: int, tag: str) -> list[dict]:
    return [
        {"custom_id": f"{tag}-{i}", "route": "echo", "query": f"{tag}: ping {i}", "params": {"max_tokens": 4}}
        for i in range(n)
    ]


def measure(gw: GatewayStack, sim, n: int, tag: str, timeout: float = 600) -> dict:
    """Reset the simulator, POST n items, wait until the batch is terminal; the first request's time."""
    body = items(n, tag)
    a = time.monotonic()
    sim.reset()
    b = time.monotonic()
    sim_zero = (a + b) / 2  # the simulator's trace clock starts here (± (b - a) / 2, ~1 ms)
    box: dict = {}

    def post() -> None:
        try:
            box["batch"] = gw.submit(body, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc
        box["answered"] = time.monotonic()

    sender = threading.Thread(target=post, daemon=True)
    t_post = time.monotonic()
    sender.start()
    sender.join(timeout)
    if "error" in box:
        raise box["error"]
    batch = box["batch"]
    deadline = time.monotonic() + timeout
    while batch.get("status") not in TERMINAL:
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch {batch.get('id')} not terminal after {timeout} s")
        time.sleep(0.2)
        batch = gw.get(batch["id"])
    arrivals = [r["arrival_s"] for r in sim.trace() if r["tag"] == tag]
    first = sim_zero + min(arrivals) - t_post if arrivals else None
    sent = provider_requests(sim.request_counts(), [batch])
    return {
        "items": n,
        "status": batch["status"],
        "ok": (batch.get("stats") or {}).get("success_count"),
        "first_request_s": first,
        "answered_201_s": box["answered"] - t_post,
        "requests": sent["requests"],
        "duplicates": sent["duplicates"],
        "clock_uncertainty_s": (b - a) / 2,
        "loadavg": load_average(),
    }


def run(args, sim, logdir: Path) -> list[dict]:
    rows: list[dict] = []
    seq = 0
    with GatewayStack(
        "shared",
        provider_file(sim.base_url, args.provider_concurrency),
        logdir,
        workers=args.workers,
        worker_concurrency=args.worker_concurrency,
        worker_pool=args.worker_pool,
    ) as gw:
        modes = args.modes.split(",")
        for rep in range(args.reps):
            for n in [int(x) for x in args.sizes.split(",")]:
                for mode in modes:
                    seq += 1
                    if mode == "cold":
                        gw.stop_workers()
                        ready_s = gw.start_workers()
                    elif mode == "idle":
                        time.sleep(args.idle_seconds)
                        ready_s = None
                    else:
                        raise SystemExit(f"unknown mode {mode!r} (cold, idle)")
                    row = measure(gw, sim, n, f"r{seq}")
                    row.update(mode=mode, rep=rep + 1, workers_ready_s=ready_s, pool=gw.pool_label)
                    if mode == "idle":
                        row["idle_s"] = args.idle_seconds
                    rows.append(row)
                    first = row["first_request_s"]
                    print(
                        f"{mode:5} {n:6} items rep {rep + 1}: first request "
                        f"{'none' if first is None else f'{first:.3f} s'}, 201 after {row['answered_201_s']:.3f} s"
                        + (f", workers ready {ready_s:.1f} s after spawn" if ready_s is not None else "")
                        + f", {row['status']}, dup {row['duplicates']}, load {row['loadavg']}",
                        flush=True,
                    )
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for mode in dict.fromkeys(r["mode"] for r in rows):
        for n in dict.fromkeys(r["items"] for r in rows):
            rs = [r for r in rows if r["mode"] == mode and r["items"] == n]
            firsts = [r["first_request_s"] for r in rs if r["first_request_s"] is not None]
            if not rs:
                continue
            out.append(
                {
                    "mode": mode,
                    "items": n,
                    "runs": len(rs),
                    "each": [r["first_request_s"] for r in rs],
                    "median": statistics.median(firsts) if firsts else None,
                    "max": max(firsts) if len(firsts) == len(rs) else None,
                    "answered_201_median": statistics.median(r["answered_201_s"] for r in rs),
                    "after_201_median": statistics.median(
                        r["first_request_s"] - r["answered_201_s"]
                        for r in rs
                        if r["first_request_s"] is not None
                    )
                    if firsts
                    else None,
                    "duplicates": sum(r["duplicates"] for r in rs),
                    "all_completed": all(r["status"] == "completed" for r in rs),
                }
            )
    return out


def render(rows: list[dict], meta: dict) -> str:
    pools = sorted({r["pool"] for r in rows})
    loads = [r["loadavg"].split()[0] for r in rows]
    lines = [
        *report_header("First request: POST → the batch's first request at the provider", meta),
        f"- stack: gunicorn + {meta['workers']} × `celery -A gateway_site worker` ({', '.join(pools)}), "
        "PostgreSQL + Redis; simulator in its own process, one ~1 ms provider without limits",
        "- *cold*: workers stopped, started again, the POST sent the moment every worker's readiness heartbeat "
        f"is in Redis; *idle*: the same workers {meta['idle_seconds']:g} s after the previous batch finished",
        f"- load average (1 min) at the measurements: {min(loads)}–{max(loads)}",
        "",
        "| situation | items | runs | first request, each (s) | median | max | 201 answer median (s) "
        f"| first request − 201, median (s) | goal ≤ {GOAL_S:g} s | provider requests beyond one per id |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        each = ", ".join("none" if v is None else f"{v:.3f}" for v in s["each"])
        med = "–" if s["median"] is None else f"**{s['median']:.3f}**"
        mx = "–" if s["max"] is None else f"{s['max']:.3f}"
        met = "met" if s["max"] is not None and s["max"] <= GOAL_S else "not met"
        lines.append(
            f"| {s['mode']} | {s['items']:,} | {s['runs']} | {each} | {med} | {mx} | {s['answered_201_median']:.3f} "
            f"| {fmt_s(s.get('after_201_median'), 3)} | {met} (max) | {s['duplicates']} |"
        )
    ready = [r["workers_ready_s"] for r in rows if r.get("workers_ready_s") is not None]
    if ready:
        lines += [
            "",
            f"Workers ready (spawn → every readiness heartbeat in Redis): median {statistics.median(ready):.1f} s, "
            f"max {max(ready):.1f} s.",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="3,900,10000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="cold,idle", help="cold (right after the workers start), idle")
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--provider-concurrency", type=int, default=32)
    ap.add_argument("--json", default=str(ROOT / "var" / "bench" / "first_request" / "results.json"))
    add_worker_args(ap)
    add_output_args(ap)
    args = ap.parse_args(argv)
    exit_cleanly_on_sigterm()
    logdir = ROOT / "var" / "bench" / "first_request"
    logdir.mkdir(parents=True, exist_ok=True)
    with run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
        rows = run(args, sim, logdir)
    meta = run_meta(
        command_line("bench/first_request.py", argv),
        workers=args.workers,
        idle_seconds=args.idle_seconds,
        worker_concurrency=args.worker_concurrency,
        worker_pool=args.worker_pool,
        summary=summary(rows),
    )
    text = render(rows, meta)
    print(text)
    save_and_publish(Path(args.json), meta, rows, args, "first-request", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory under a long load (issue #36 "Performance", Measure: "RSS per worker child and per uvicorn
process after a 10-minute soak at 500 calls/s plus a running batch: no growth beyond 5 % after
warm-up").

    .venv/bin/python bench/soak.py                      # 10 minutes, 500 calls/s, writes docs
    .venv/bin/python bench/soak.py --minutes 2 --no-write

Pieces, each a process of its own: the simulator (`python -m sim`: "fast", 1 ms, no limits, for the
interactive calls; "bulk", 2 ms, for the batch), the gateway as users run it (bench.interactive_stack:
PostgreSQL + Redis, `uvicorn gateway_site.asgi:application --workers 2`, one
`celery -A gateway_site worker` with Celery's default pool), and the load generator (bench/loadgen.py,
open loop). A batch of ``--batch-items`` items on the "bulk" route (held to ``--batch-rpm`` by its
provider's RPM, so it runs through the whole soak) is submitted first; then windows of ``--window``
seconds of ``--rate`` calls/s on /v1/chat/completions follow each other for ``--minutes``. After each
window the RSS (VmRSS of /proc/<pid>/status) of every uvicorn worker and every Celery pool child is
read. Growth: the last sample against the sample at the end of the warm-up (``--warmup-minutes``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    SHARED_MACHINE,
    add_output_args,
    command_line,
    fmt_s,
    report_header,
    run_meta,
    save_and_publish,
)
from bench.interactive_stack import InteractiveStack, cpu_seconds, uvicorn_command  # noqa: E402
from bench.loadgen import LoadGen  # noqa: E402
from bench.stack import exit_cleanly_on_sigterm, pool_children  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

GOAL_GROWTH = 0.05


def sim_config() -> dict:
    fast = {"model": "fast-1ms", "median_ms": 1, "sigma": 0, "completion_tokens": 4, "max_concurrency": 10000}
    bulk = {"model": "bulk-2ms", "median_ms": 2, "sigma": 0, "completion_tokens": 8, "max_concurrency": 10000}
    return {"time_scale": 1, "seed": 1, "providers": {"fast": fast, "bulk": bulk}}


def provider_file(sim_url: str, batch_rpm: int) -> dict:
    def provider(name: str, model: str, rpm: int) -> dict:
        return {"name": name, "kind": "openai", "base_url": f"{sim_url}/{name}/v1", "model": model, "rpm": rpm,
                "tpm": 1_000_000_000, "max_concurrency": 10_000, "burst_seconds": 1, "timeout_seconds": 30,
                "max_retries": 3, "enabled": True}  # fmt: skip

    return {
        "providers": [provider("fast", "fast-1ms", 1_000_000), provider("bulk", "bulk-2ms", batch_rpm)],
        "routes": [
            {"route": "echo", "provider": "fast", "priority": 0, "weight": 1},
            {"route": "bulk", "provider": "bulk", "priority": 0, "weight": 1},
        ],
    }


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def serving_processes(gw: InteractiveStack) -> dict[str, int]:
    out = {f"uvicorn worker {i + 1}": pid for i, pid in enumerate(gw.uvicorn_pids())}
    for w, proc in enumerate(gw.worker_procs):
        for i, pid in enumerate(pool_children(proc.pid)):
            out[f"celery worker {w + 1} child {i + 1}"] = pid
    return out


def soak(gw: InteractiveStack, lg: LoadGen, args) -> tuple[list[dict], dict]:
    items = [
        {
            "custom_id": f"b{i}",
            "route": "bulk",
            "query": f"document {i}: summarise it",
            "params": {"max_tokens": 8},
        }
        for i in range(args.batch_items)
    ]
    batch = gw.submit(items, timeout=600)
    procs = serving_processes(gw)
    print(f"batch {batch['id']} ({args.batch_items} items); processes {procs}", flush=True)
    samples: list[dict] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.minutes * 60:
        c0 = cpu_seconds(list(procs.values()))
        out = lg.run({"op": "open", "target": "gw", "rate": args.rate, "duration": args.window})
        lat = sorted(out.get("lat_ms") or [])
        n = len(lat)
        counts = (gw.get(batch["id"]).get("request_counts")) or {}
        sample = {
            "t": round(time.monotonic() - t0, 1),
            "rss_kib": {name: rss_kib(pid) for name, pid in procs.items()},
            "calls": n,
            "fail": out.get("fail", 0),
            "errors": out.get("errors") or {},
            "p50_ms": lat[n // 2] if n else None,
            "p99_ms": lat[min(n - 1, int(n * 0.99))] if n else None,
            "cpu_s": cpu_seconds(list(procs.values())) - c0,
            "batch_done": (counts.get("completed") or 0) + (counts.get("failed") or 0),
        }
        samples.append(sample)
        print(
            f"t={sample['t']:>6}s calls {n} fail {sample['fail']} p50 {fmt_s(sample['p50_ms'])} p99 "
            f"{fmt_s(sample['p99_ms'])} ms batch {sample['batch_done']}/{args.batch_items} rss MiB "
            + " ".join(f"{(v or 0) / 1024:.0f}" for v in sample["rss_kib"].values()),
            flush=True,
        )
    return samples, procs


def growth(samples: list[dict], warmup_s: float) -> dict[str, dict]:
    base = next((s for s in samples if s["t"] >= warmup_s), samples[0])
    last = samples[-1]
    out = {}
    for name, start in base["rss_kib"].items():
        end = last["rss_kib"].get(name)
        if start and end:
            out[name] = {"warm_kib": start, "end_kib": end, "growth": end / start - 1,
                         "peak_kib": max(s["rss_kib"].get(name) or 0 for s in samples)}  # fmt: skip
    return out


def render(samples: list[dict], grown: dict[str, dict], meta: dict) -> str:
    lines = report_header("Memory under a soak (issue #36)", meta, SHARED_MACHINE)
    calls = sum(s["calls"] for s in samples)
    fails = sum(s["fail"] for s in samples)
    worst = max((g["growth"] for g in grown.values()), default=0.0)
    lines += [
        f"{meta['minutes']} minutes of {meta['rate']} calls/s on /v1/chat/completions ({calls} calls, {fails} "
        f"failed) with a {meta['batch_items']}-item batch running beside it (its provider at "
        f"{meta['batch_rpm']} RPM). RSS at the end of the {meta['warmup_minutes']}-minute warm-up → at the end; "
        f"goal: ≤ {GOAL_GROWTH:.0%} growth — worst {worst:+.1%} "
        + ("(met)." if worst <= GOAL_GROWTH else "(**missed**)."),
        "",
        "| process | RSS after warm-up (MiB) | RSS at the end (MiB) | peak (MiB) | growth |",
        "|---|---|---|---|---|",
    ]
    for name, g in grown.items():
        lines.append(
            f"| {name} | {g['warm_kib'] / 1024:.1f} | {g['end_kib'] / 1024:.1f} | {g['peak_kib'] / 1024:.1f} | "
            f"{g['growth']:+.1%} |"
        )
    lines += ["", "| t (s) | calls | failed | p50 (ms) | p99 (ms) | CPU s (all serving processes) | batch done |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    step = max(1, len(samples) // 12)
    for s in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        lines.append(
            f"| {s['t']} | {s['calls']} | {s['fail']} | {fmt_s(s['p50_ms'])} | {fmt_s(s['p99_ms'])} | "
            f"{s['cpu_s']:.1f} | {s['batch_done']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--warmup-minutes", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=500.0, help="interactive calls per second")
    ap.add_argument(
        "--window", type=float, default=20.0, help="seconds per load window (a sample after each)"
    )
    ap.add_argument("--batch-items", type=int, default=50_000)  # the per-batch maximum
    ap.add_argument(
        "--batch-rpm", type=int, default=4_800, help="the batch provider's RPM (50,000 items last 10.4 min)"
    )
    ap.add_argument("--uvicorn-workers", type=int, default=2)
    add_output_args(ap)
    args = ap.parse_args(argv)
    exit_cleanly_on_sigterm()
    logdir = ROOT / "var" / "bench" / "soak"
    logdir.mkdir(parents=True, exist_ok=True)
    with run_simulator_subprocess(sim_config(), log_path=logdir / "sim.log") as sim:
        with InteractiveStack(provider_file(sim.base_url, args.batch_rpm), logdir, uvicorn_workers=args.uvicorn_workers,
                              workers=1) as gw:  # fmt: skip
            body = {"model": "echo", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
            targets = {"gw": {"url": gw.chat_url, "headers": gw.headers, "body": body}}
            with LoadGen(targets, logdir) as lg:
                samples, _procs = soak(gw, lg, args)
    grown = growth(samples, args.warmup_minutes * 60)
    meta = run_meta(
        command_line("bench/soak.py", argv), uvicorn=uvicorn_command(args.uvicorn_workers),
        worker="celery -A gateway_site worker (default pool)", minutes=args.minutes, rate=args.rate,
        warmup_minutes=args.warmup_minutes, batch_items=args.batch_items, batch_rpm=args.batch_rpm,
    )  # fmt: skip
    text = render(samples, grown, meta)
    print(text)
    save_and_publish(logdir / "soak.json", meta, [{"samples": samples, "growth": grown}], args, "soak", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

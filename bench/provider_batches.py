"""Provider batch APIs (issue #23): cost and real-time quota of a deadline-tolerant batch sent through
the providers' own batch APIs, other teams' real-time traffic beside it, and the deadline guard's worst
case.

    .venv/bin/python bench/provider_batches.py            # writes docs/benchmarks.md ("issue #23")

Production-shaped stack (bench.stack.GatewayStack "shared": gunicorn + 2 × `celery -A gateway_site
worker`, Celery's default prefork pool; PostgreSQL + Redis) against the simulator (time_scale 1000: its
real-time latencies are sub-millisecond; a provider batch's turnaround is set in simulated ms, 8 s real).
Two providers with batch APIs, `oa` (kind openai) and `an` (kind anthropic), priced 1 / 2 per million
prompt / completion tokens, `batch_price_factor` 0.5, 6,000 rpm each in the gateway's buckets.

Runs, in this order (before/after interleaved in one run):
  b-alone     team B: 300 real-time items (no window) over oa + an, alone
  a-pbatch    team A: N items, completion_window 24h, provider_batch auto — and team B's 300 real-time
              items submitted 1 s after it: B's time and its real-time requests beside A's provider batches
  a-realtime  team A: the same N items with provider_batch never (the all-real-time run the cost is
              compared with), and team B's 300 beside it
  guard       team C: 1,200 items on `late` (kind openai, batch turnaround 1,000 s real > the 60 s window,
              batch_min_window_seconds 60), guard margin 20 s: the fraction finished before expires_at
The guard run uses GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS=20 and batch_min_window_seconds=60 so
that a 60 s window is diverted at all — a configuration nobody deploys (defaults: 300 s, = turnaround).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, SHARED_MACHINE, command_line, replace_section, report_header, run_meta  # noqa: E402
from bench.stack import GatewayStack  # noqa: E402
from sim.testing import run_simulator_in_thread  # noqa: E402

MARKER = "provider-batches"
KEY = "sk-bench"
TURNAROUND_MS = 8_000_000  # 8 s real at time_scale 1000


def sim_config() -> dict:
    common = {"api_key": KEY, "median_ms": 50, "sigma": 0.2, "completion_tokens": {"median": 6, "sigma": 0}}
    return {
        "time_scale": 1000,
        "seed": 5,
        "providers": {
            "oa": {"kind": "openai", "batch_turnaround_ms": TURNAROUND_MS, **common},
            "an": {"kind": "anthropic", "batch_turnaround_ms": TURNAROUND_MS, **common},
            "late": {"kind": "openai", "batch_turnaround_ms": 1e9, "batch_progress": True, **common},
        },
    }


def providers_file(sim) -> dict:
    def entry(name: str, kind: str, **extra) -> dict:
        return {"name": name, "kind": kind, "base_url": sim.kind_url(name, kind), "model": f"{name}-m",
                "api_key": KEY, "rpm": 6000, "tpm": 10_000_000, "max_concurrency": 50, "batch_api": True,
                "batch_price_factor": 0.5, **extra}  # fmt: skip

    return {
        "providers": [
            entry("oa", "openai"),
            entry("an", "anthropic"),
            entry("late", "openai", batch_min_window_seconds=60),
        ],
        "routes": [
            {"route": "work", "provider": "oa", "weight": 1},
            {"route": "work", "provider": "an", "weight": 1},
        ],
    }


def items(prefix: str, n: int, route: str | None = "work", provider: str | None = None) -> list[dict]:
    out = []
    for i in range(n):
        item = {
            "custom_id": f"{prefix}{i}",
            "query": f"[{prefix}{i}] summarise ticket {i}",
            "params": {"max_tokens": 16},
        }
        item["route" if route else "provider"] = route or provider
        out.append(item)
    return out


def post(gw: GatewayStack, headers: dict, batch_items: list[dict], **options) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = gw.http.post(
        f"{gw.url}/api/v1/batches", json={"items": batch_items, **options}, headers=headers, timeout=600
    )
    if r.status_code != 201:
        raise RuntimeError(f"submit: HTTP {r.status_code}: {r.text[:400]}")
    return r.json(), t0


def wait(gw: GatewayStack, headers: dict, batch_id: str, timeout: float = 400) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        b = gw.get(batch_id, headers=headers)
        if b.get("completed_at"):
            return b
        time.sleep(0.25)
    raise TimeoutError(f"batch {batch_id} did not end in {timeout} s")


def realtime_requests(sim, prefix: str) -> int:
    return sum(n for ids in sim.request_counts().values() for rid, n in ids.items() if rid.startswith(prefix))


def batch_lines(sim) -> int:
    return sum(sum(ids.values()) for ids in sim.batch_lines().values())


def seconds(b: dict) -> float:
    start = dt.datetime.fromisoformat(b["created_at"].replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(b["completed_at"].replace("Z", "+00:00"))
    return (end - start).total_seconds()


def run_pair(gw, sim, a_headers, b_headers, n: int, mode: str) -> dict:
    sim.reset()
    a, t0 = post(gw, a_headers, items(f"a{mode[0]}-", n), completion_window="24h", provider_batch=mode)
    time.sleep(1.0)
    b, _ = post(gw, b_headers, items(f"b{mode[0]}-", 300))
    b = wait(gw, b_headers, b["id"])
    a = wait(gw, a_headers, a["id"])
    usage = a["stats"]["token_usage"]
    return {
        "run": f"a-{'pbatch' if mode == 'auto' else 'realtime'}",
        "a_status": a["status"],
        "a_items": a["request_counts"]["total"],
        "a_seconds": seconds(a),
        "a_cost": usage["cost"],
        "a_saved": usage.get("saved_vs_realtime"),
        "a_realtime_requests": realtime_requests(sim, f"a{mode[0]}-"),
        "a_batch_lines": batch_lines(sim),
        "a_batch_api_calls": a["stats"].get("batch_api_calls", 0),
        "b_seconds": seconds(b),
        "b_realtime_requests": realtime_requests(sim, f"b{mode[0]}-"),
    }


def run_guard(gw, sim, c_headers) -> dict:
    sim.reset()
    c, _ = post(gw, c_headers, items("c-", 1200, route=None, provider="late"), completion_window="60s")
    c = wait(gw, c_headers, c["id"], timeout=200)
    results = gw.http.get(f"{gw.url}/api/v1/batches/{c['id']}/results", params={"format": "jsonl"},
                          headers=c_headers, timeout=120).text.splitlines()  # fmt: skip
    import json

    rows = [json.loads(line) for line in results if line.strip()]
    expires = dt.datetime.fromisoformat(c["expires_at"].replace("Z", "+00:00"))
    done = dt.datetime.fromisoformat(c["completed_at"].replace("Z", "+00:00"))
    ok = sum(1 for r in rows if r["ok"])
    return {
        "run": "guard",
        "c_status": c["status"],
        "items": len(rows),
        "succeeded": ok,
        "fraction_ok_before_expiry": ok / len(rows) if done <= expires else 0.0,
        "ended_before_expiry_by_s": (expires - done).total_seconds(),
        "c_seconds": seconds(c),
        "realtime_requests": realtime_requests(sim, "c-"),
        "batch_lines": batch_lines(sim),
        "batch_api_calls": c["stats"].get("batch_api_calls", 0),
        "served_by_provider_batch": sum(1 for r in rows if r.get("served_by") == "provider_batch"),
    }


def report(meta: dict, b_alone: float, pairs: list[dict], guard: dict) -> str:
    pb = next(p for p in pairs if p["run"] == "a-pbatch")
    rt = next(p for p in pairs if p["run"] == "a-realtime")
    ratio = pb["a_cost"] / rt["a_cost"] if rt["a_cost"] else None
    lines = report_header("Provider batch APIs (issue #23)", meta, SHARED_MACHINE)
    lines += [
        f"- load average at the end: {meta['loadavg']}; each run short (the machine is shared)",
        "",
        f"{pb['a_items']:,} items, completion_window 24h, over two providers with batch APIs (`oa` openai, `an` "
        "anthropic, route weight 1:1), simulator turnaround 8 s; team B: 300 real-time items submitted 1 s "
        "after A's batch, on the same two providers.",
        "",
        "| run | A's cost | A's real-time requests | A's batch lines | A's batch-API calls | A's time | B's time (alone: "
        f"{b_alone:.1f} s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in pairs:
        lines.append(
            f"| {p['run']} | {p['a_cost']:.6f} | {p['a_realtime_requests']:,} | {p['a_batch_lines']:,} | "
            f"{p['a_batch_api_calls']:,} | {p['a_seconds']:.1f} s | {p['b_seconds']:.1f} s |"
        )
    lines += [
        "",
        f"- cost, provider batch / all real time: **{ratio:.4f}** (goal 0.5 ± 1 %: "
        f"{'met' if ratio is not None and abs(ratio - 0.5) <= 0.005 else 'NOT met'}); saved vs real time "
        f"(stats): {pb['a_saved']}",
        f"- real-time quota used by A's provider-batch run: {pb['a_realtime_requests']} requests (goal 0)",
        f"- team B beside A: {pairs[0]['b_seconds']:.1f} s with A on provider batches, {pairs[1]['b_seconds']:.1f} s "
        f"with A in real time, {b_alone:.1f} s alone",
        "",
        "Deadline guard, worst case (labelled: guard margin 20 s and batch_min_window_seconds 60 so that a 60 s "
        "window is diverted at all — not a deployed configuration; defaults are 300 s and the 24 h turnaround): "
        f"1,200 items on `late` (batch turnaround 1,000 s > the 60 s window): status {guard['c_status']}, "
        f"{guard['succeeded']:,}/{guard['items']:,} succeeded, "
        f"**fraction finished before expires_at: {guard['fraction_ok_before_expiry']:.3f}** (goal 1.0), the batch "
        f"ended {guard['ended_before_expiry_by_s']:.1f} s before expires_at; {guard['served_by_provider_batch']} "
        f"served by the provider batch (its {guard['batch_lines']:,} lines were cancelled by the guard; "
        f"{guard['batch_api_calls']} batch-API calls), {guard['realtime_requests']:,} real-time requests.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    logdir = ROOT / "var" / "bench" / "provider_batches"
    env = {
        "GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS": "1",
        "GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS": "2",
        "GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS": "20",
        "GATEWAY_CLAIM_LEASE_SECONDS": "6",
    }
    with run_simulator_in_thread(sim_config()) as sim:
        with GatewayStack(mode="shared", providers=providers_file(sim), logdir=logdir, extra_env=env) as gw:
            a_headers, b_headers, c_headers = gw.headers, gw.add_team("teamb"), gw.add_team("teamc")
            # prices are not fields of the provider file: set in the database, as an operator would (admin)
            gw.manage("shell", "-c", "from providers.models import Provider; Provider.objects.update("
                      "price_prompt_per_million=1, price_completion_per_million=2)", env=gw._env)  # fmt: skip
            sim.reset()
            b, _ = post(gw, b_headers, items("b0-", 300))
            b_alone = seconds(wait(gw, b_headers, b["id"]))
            pairs = [run_pair(gw, sim, a_headers, b_headers, args.items, "auto"),
                     run_pair(gw, sim, a_headers, b_headers, args.items, "never")]  # fmt: skip
            guard = run_guard(gw, sim, c_headers)
    meta = run_meta(command_line("bench/provider_batches.py", argv))
    print(pairs, guard)
    text = report(meta, b_alone, pairs, guard)
    print(text)
    if not args.no_write:
        replace_section(Path(args.out), MARKER, text)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

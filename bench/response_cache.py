"""Issue #25: a fully cached 10,000-item batch against the same batch uncached — submission-to-done
time and cost, side by side, runs interleaved in time.

    .venv/bin/python bench/response_cache.py                  # 10,000 items, writes docs/benchmarks.md
    .venv/bin/python bench/response_cache.py --items 2000 --no-write

The shared stack (PostgreSQL + Redis, gunicorn, 2 × `celery -A gateway_site worker`, default prefork
pool and concurrency) in front of the simulator (its own process; median 50 ms, no rate limit there,
gateway rpm/tpm 10^6). One provider with prices (prompt $1, completion $4 per million tokens). Runs:
uncached (`cache: false`), a first `cache: true` run (sent; it stores the answers), then cached
(`cache: true` again) and uncached alternately. Each row: wall time from the POST to a terminal status,
the provider requests the simulator saw, the batch's `stats.token_usage.cost` and `stats.cache_hits`.
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
    load_average,
    report_header,
    run_meta,
    save_and_publish,
)
from bench.stack import TERMINAL, GatewayStack  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

MARKER = "issue-25-response-cache"
HUGE = 1_000_000
SIM_CFG = {"providers": {"rc": {"model": "rc-m", "median_ms": 50, "sigma": 0.3, "completion_tokens": 16}}}
PRICES = (
    "Provider.objects.filter(name='rc').update(price_prompt_per_million=1, price_completion_per_million=4)"
)


def provider_file(base_url: str) -> dict:
    return {
        "providers": [
            {"name": "rc", "base_url": f"{base_url}/rc/v1", "model": "rc-m", "rpm": HUGE, "tpm": HUGE,
             "max_concurrency": 64, "burst_seconds": 60, "timeout_seconds": 30, "max_retries": 3},
        ],
        "routes": [{"route": "eval", "provider": "rc"}],
    }  # fmt: skip


def items(n: int) -> list[dict]:
    return [
        {"custom_id": f"e{i}", "route": "eval", "query": f"evaluation question {i}: " + "context " * 20,
         "params": {"max_tokens": 16, "temperature": 0}}
        for i in range(n)
    ]  # fmt: skip


def run(gw: GatewayStack, sim, its: list[dict], cache: bool, timeout: float = 900) -> dict:
    sim.reset()
    t0 = time.monotonic()
    r = gw.http.post(f"{gw.url}/api/v1/batches", json={"items": its, "cache": cache}, headers=gw.headers,
                     timeout=600)  # fmt: skip
    if r.status_code != 201:
        raise RuntimeError(f"submit: HTTP {r.status_code}: {r.text[:300]}")
    batch_id = r.json()["id"]
    while time.monotonic() - t0 < timeout:
        batch = gw.get(batch_id)
        if batch["status"] in TERMINAL:
            break
        time.sleep(0.2)
    else:
        raise TimeoutError(batch_id)
    wall = time.monotonic() - t0
    stats = batch.get("stats") or {}
    usage = stats.get("token_usage") or {}
    return {
        "cache": cache,
        "status": batch["status"],
        "wall_s": round(wall, 2),
        "items_per_s": round(len(its) / wall, 1),
        "provider_requests": sum(sum(ids.values()) for ids in sim.request_counts().values()),
        "cache_hits": stats.get("cache_hits"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "cost": usage.get("cost"),
        "loadavg": load_average(),
    }


def render(rows: list[dict], meta: dict) -> str:
    lines = [
        *report_header(
            "Issue #25: a fully cached 10,000-item batch against the uncached run", meta, SHARED_MACHINE
        ),
        f"- {meta['items']} items (distinct prompts, temperature 0), one provider (simulator, median 50 ms, "
        "max_concurrency 64, no rate limit reached); 2 workers, default prefork pool and concurrency; "
        "prices $1 / $4 per million prompt / completion tokens",
        "- wall = POST to terminal status (submission included); runs in the order shown (interleaved)",
        "- the machine is shared: absolute times are noisy (see the load averages), the side-by-side ratio is the "
        "figure; a hit costs a lookup and one owner-guarded write per claim (no quota, no HTTP call), so the "
        "cached run is bound by database writes and the dispatcher's claim loop; the first `cache: true` run "
        "also stores every answer and takes and releases a leader row per distinct prompt",
        "",
        "| # | run | wall s | items/s | provider requests | cache_hits | billed prompt + completion tokens | cost $ | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {r['label']} | {r['wall_s']:.1f} | {r['items_per_s']:.0f} | {r['provider_requests']} "
            f"| {r['cache_hits']} | {r['prompt_tokens']} + {r['completion_tokens']} | {r['cost']} | {r['loadavg']} |"
        )
    un = [r["wall_s"] for r in rows if r["label"] == "uncached"]
    hit = [r["wall_s"] for r in rows if r["label"] == "cached"]
    if un and hit:
        u, h = sum(un) / len(un), sum(hit) / len(hit)
        lines += ["", f"Mean wall: uncached {u:.1f} s, fully cached {h:.1f} s — **{u / h:.1f}× faster**; "
                  f"cost {rows[0]['cost']} $ → 0 $ (0 provider requests, 0 billed tokens)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    add_output_args(ap)
    args = ap.parse_args(argv)
    logdir = ROOT / "var" / "bench" / "response_cache"
    logdir.mkdir(parents=True, exist_ok=True)
    its = items(args.items)
    rows = []
    with run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
        with GatewayStack("shared", provider_file(sim.base_url), logdir, workers=args.workers) as gw:
            gw.manage("shell", "-c", f"from providers.models import Provider; {PRICES}", env=gw._env)
            plan = [("uncached", False), ("first cache: true (sent, stores)", True), ("cached", True),
                    ("uncached", False), ("cached", True)]  # fmt: skip
            for label, cache in plan:
                row = {"label": label, **run(gw, sim, its, cache)}
                print(row, flush=True)
                rows.append(row)
    meta = run_meta(command_line("bench/response_cache.py", argv), items=args.items)
    save_and_publish(logdir / "results.json", meta, rows, args, MARKER, render(rows, meta))
    print(render(rows, meta))


if __name__ == "__main__":
    main()

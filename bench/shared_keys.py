"""Shared keys (issue #24): a key whose limit an outside client spends 25 %, 50 % or 75 % of, adaptive on
vs off, interleaved in time.

    .venv/bin/python bench/shared_keys.py                 # 600 items per run, shares 25/50/75 %
    .venv/bin/python bench/shared_keys.py --items 300 --no-write

One simulator subprocess (time_scale 5): per share a key of 1 200 rpm simulated = 100 requests per real
second (a bucket of 100), its outside client (the simulator's, sim/outside.py) spending that share all
along, and two gateway providers on the key, ``on<share>`` (adaptive) and ``off<share>``. One gateway
stack (PostgreSQL, Redis, 2 Celery workers of the default prefork pool, bench/stack.py) runs a batch
per provider in the order on25, off25, on50, off50, on75, off75. Per run: the 429s the provider
answered the gateway (of its requests), the throughput at the provider (200s per second over the
steady part: the first 20 % of the run's arrivals — the bucket's first burst — left out) and that
throughput as a fraction of what the provider had left ((1 − share) × 100/s; goal ≥ 0.9).
"""

from __future__ import annotations

import argparse
import secrets
import sys
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
    utc_now,
)
from sim.testing import run_simulator_subprocess  # noqa: E402

TIME_SCALE = 5
SIM_RPM = 1200  # per simulated minute
REAL_RPS = SIM_RPM * TIME_SCALE / 60  # 100 requests per real second
SHARES = (0.25, 0.5, 0.75)
MARKER = "shared-keys"
REDIS = "redis://127.0.0.1:6379/13"  # this work's Redis database on the shared machine


def sim_config(shares) -> dict:
    keys, providers = {}, {}
    for share in shares:
        key = f"k{int(share * 100)}"
        keys[key] = {
            "rpm": SIM_RPM,
            "burst_seconds": 5,
            "outside": {"rps": SIM_RPM / 60 * share, "tokens": 10},
        }
        for mode in ("on", "off"):
            providers[f"{mode}{int(share * 100)}"] = {"shared_key": key, "median_ms": 100, "sigma": 0.3}
    return {"time_scale": TIME_SCALE, "seed": 24, "trace_tag_regex": r"tag(\w+)", "shared_keys": keys,
            "providers": providers}  # fmt: skip


def providers_file(cfg: dict, base_url: str) -> dict:
    entries = [
        {"name": name, "kind": "openai", "base_url": f"{base_url}/{name}/v1", "model": "m",
         "rpm": int(SIM_RPM * TIME_SCALE), "tpm": 10**8, "max_concurrency": 32, "burst_seconds": 1,
         "timeout_seconds": 30, "max_retries": 5, "adaptive": name.startswith("on")}
        for name in cfg["providers"]
    ]  # fmt: skip
    return {"providers": entries, "routes": []}


def items(provider: str, n: int) -> list[dict]:
    return [{"custom_id": f"{provider}-{i:04d}", "provider": provider, "query": f"q tag{provider}x{i:04d}",
             "params": {"max_tokens": 4}} for i in range(n)]  # fmt: skip


def steady_rate(arrivals: list[float]) -> float | None:
    """200s per second over the run's arrivals without its first 20 % (the bucket's first burst)."""
    arrivals = sorted(arrivals)
    steady = arrivals[len(arrivals) // 5 :]
    if len(steady) < 2 or steady[-1] <= steady[0]:
        return None
    return (len(steady) - 1) / (steady[-1] - steady[0])


def run_one(gw, sim, provider: str, share: float, n: int) -> dict:
    before = sim.provider_counters(provider)
    key = f"k{int(share * 100)}"
    outside_before = sim.counters()["shared_keys"][key]["outside_429"]
    seen = len(sim.trace())
    batch, wall = gw.run_batch(items(provider, n))
    after = sim.provider_counters(provider)
    outside_429 = sim.counters()["shared_keys"][key]["outside_429"] - outside_before
    rows = [r for r in sim.trace()[seen:] if r["provider"] == provider and r["status"] == 200]
    requests = after["requests"] - before["requests"]
    limited = after["rate_limited_429"] - before["rate_limited_429"]
    rate = steady_rate([float(r["arrival_s"]) for r in rows])
    left = (1 - share) * REAL_RPS
    ok = int((batch.get("stats") or {}).get("success_count") or 0)
    return {
        "provider": provider, "share": share, "adaptive": provider.startswith("on"), "items": n,
        "items_ok": ok, "requests": requests, "rate_limited": limited,
        "rate_429": limited / requests if requests else None, "wall_s": wall, "throughput": rate,
        "left": left, "fraction": None if rate is None else rate / left, "outside_429": outside_429,
        "run_at": utc_now(),
        "loadavg": load_average(),
    }  # fmt: skip


def render(rows: list[dict], meta: dict) -> str:
    lines = [
        *report_header(
            "Shared keys: quota that follows the provider's remaining-quota headers (issue #24)",
            meta,
            SHARED_MACHINE + "; each run is short (seconds), the whole bench ~2-3 min",
        ),  # fmt: skip
        f"- workload: per run {meta['items']} items (max_tokens 4) to one provider; the simulator (time_scale "
        f"{TIME_SCALE}) gives each share its own key of {REAL_RPS:.0f} requests per real second (bucket 100), "
        "its outside client spending that share from the start, two gateway providers on it (adaptive on "
        "/ off, configured at the key's full rate, burst 1 s), 2 Celery workers (default prefork pool, 2 "
        "children each); runs interleaved on, off per share",
        "- throughput: 200s per second at the provider over the run without its first 20 % of arrivals "
        "(the first burst); left = (1 − share) × 100/s, what the outside client leaves; goal fraction ≥ 0.9 "
        "(above 1: the gateway took some of the outside client's share — its 429s in the run)",
        "",
        "| outside share | adaptive | items ok | gateway requests | 429s | 429 rate | throughput (/s) | left (/s) "
        "| fraction of left | outside client's 429s | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        frac = "–" if r["fraction"] is None else f"{r['fraction']:.2f}"
        thr = "–" if r["throughput"] is None else f"{r['throughput']:.1f}"
        lines.append(
            f"| {r['share']:.0%} | {'on' if r['adaptive'] else 'off'} | {r['items_ok']}/{r['items']} "
            f"| {r['requests']} | {r['rate_limited']} | {r['rate_429']:.1%} | {thr} | {r['left']:.0f} "
            f"| {frac} | {r['outside_429']} | {r['wall_s']:.1f} |"
        )
    lines += ["", READING]
    return "\n".join(lines) + "\n"


READING = (
    "Reading: with `adaptive` the gateway saw no 429 at any share and kept to what the outside client left "
    "(fraction ≈ 1.0, goal ≥ 0.9 met; the outside client was never turned away); without it the gateway "
    "sent at the configured full rate into a key another client was spending, got 429s rising with the "
    "share, retried them, and pushed the outside client into 429s too. Throughput is about the same "
    "either way: the provider's limit binds; the difference is the 429s (and the retries they cost)."
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=600)
    ap.add_argument("--shares", type=float, nargs="+", default=list(SHARES))
    add_output_args(ap)
    args = ap.parse_args()
    from bench.stack import GatewayStack

    cfg = sim_config(args.shares)
    logdir = ROOT / "var" / "bench" / "shared_keys"
    logdir.mkdir(parents=True, exist_ok=True)
    rows = []
    with run_simulator_subprocess(cfg, log_path=logdir / "sim.log") as sim:
        extra = {"CELERY_TASK_DEFAULT_QUEUE": f"bench-shared-{secrets.token_hex(4)}"}
        db = "postgres://postgres@127.0.0.1:5432/gateway_bench_shared_keys"
        with GatewayStack("shared", providers_file(cfg, sim.base_url), logdir / "stack", workers=2,
                          database_url=db, redis_url=REDIS, extra_env=extra) as gw:  # fmt: skip
            for share in args.shares:
                for mode in ("on", "off"):
                    row = run_one(gw, sim, f"{mode}{int(share * 100)}", share, args.items)
                    print(row, flush=True)
                    rows.append(row)
    meta = run_meta(command_line("bench/shared_keys.py"), items=args.items)
    text = render(rows, meta)
    print(text)
    save_and_publish(logdir / "results.json", meta, rows, args, MARKER, text)


if __name__ == "__main__":
    main()

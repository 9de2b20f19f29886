"""Seconds from a `load_providers` commit to the new rate holding at the provider (issue #10).

    .venv/bin/python bench/reload.py                    # pub/sub on and off, 3 runs each
    .venv/bin/python bench/reload.py --modes pubsub --runs 1 --no-write

PostgreSQL + Redis + 2 Celery workers (bench/stack.py) run a large batch against one simulated provider
that has no limit of its own (so nothing but the gateway shapes the traffic). The gateway's provider
starts at rpm 1,200 (burst 5 s); after a few seconds at full rate `manage.py load_providers` lowers it
to 240. The bench listens on the config channel: the announcement marks the commit; at that moment it
sends a marker request to the simulator, so the commit is placed on the simulator's clock.

"Holds from t" = every request that reached the provider from t on fits a 240 rpm bucket of capacity
240 × 5 / 60 = 20 that is full at t. Reported: min t − commit (0 when the traffic conforms from the commit
itself), per run. Mode "poll": GATEWAY_CONFIG_PUBSUB=0, i.e. the periodic version check alone (every
GATEWAY_CONFIG_REFRESH_SECONDS = 2 s), the mechanism before the change events.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    SHARED_MACHINE,
    add_output_args,
    command_line,
    replace_section,
    report_header,
    run_meta,
    save_and_publish,
    utc_now,
)
from bench.stack import add_worker_args  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

OLD_RPM, NEW_RPM, BURST_S = 1200, 240, 5.0


def provider_file(url: str, rpm: int) -> dict:
    entry = {"name": "rl", "base_url": url, "model": "m", "rpm": rpm, "tpm": 10**9, "max_concurrency": 32,
             "burst_seconds": BURST_S, "timeout_seconds": 30, "max_retries": 3}  # fmt: skip
    return {"providers": [entry], "routes": []}


def holds_after(arrivals: list[float], start: float, rate: float, capacity: float) -> float:
    """min t >= start such that arrivals in [t, ∞) conform to a bucket (rate, capacity) full at t."""
    after = sorted(a for a in arrivals if a >= start)
    for t in [start, *after]:
        if _conforms([a for a in after if a >= t], t, rate, capacity):
            return t
    return after[-1] if after else start


def _conforms(arrivals: list[float], start: float, rate: float, capacity: float) -> bool:
    level, last = capacity, start
    for a in arrivals:
        level = min(capacity, level + (a - last) * rate)
        last = a
        if level < 1 - 1e-9:
            return False
        level -= 1
    return True


def listen_for_commit(redis_url: str, channel: str, box: dict, ready: threading.Event) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel)
    ready.set()
    while "stop" not in box:
        message = pubsub.get_message(timeout=0.2)
        if message is not None and "commit" not in box:
            box["commit"] = time.monotonic()
            box.get("on_commit", lambda: None)()
    pubsub.close()
    client.close()


def run_one(sim, mode: str, logdir: Path, pool: tuple = (None, None)) -> dict:
    """pool: (worker_pool, worker_concurrency) for GatewayStack; (None, None) = Celery's defaults."""
    from bench.stack import GatewayStack

    url = sim.provider_url("rl")
    extra = {
        "GATEWAY_CONFIG_PUBSUB": "0" if mode == "poll" else "1",
        "CELERY_TASK_DEFAULT_QUEUE": f"bench-reload-{secrets.token_hex(4)}",
        "GATEWAY_CHUNK_SIZE": "250",
    }
    db = "postgres://postgres@127.0.0.1:5432/gateway_bench_limits"
    items = [{"custom_id": f"k{i:05d}", "provider": "rl", "query": f"q tag-k{i:05d}", "params": {"max_tokens": 4}}
             for i in range(3000)]  # fmt: skip
    with GatewayStack(
        "shared", provider_file(url, OLD_RPM), logdir / mode, workers=2, database_url=db, extra_env=extra,
        worker_pool=pool[0], worker_concurrency=pool[1],
    ) as gw:  # fmt: skip
        label = gw.pool_label
        env = gw._env
        sim.reset()
        batch = gw.submit(items)
        # full rate for a while: the burst (100) plus ~4 s at 20/s
        deadline = time.monotonic() + 120
        while sim.provider_counters("rl")["requests"] < 180 and time.monotonic() < deadline:
            time.sleep(0.05)
        box: dict = {}
        ready = threading.Event()

        def mark() -> None:
            httpx.post(
                url + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "tag-marker"}]},
                timeout=10,
            )

        box["on_commit"] = mark
        channel = env["GATEWAY_REDIS_PREFIX"] + "config:changed"
        listener = threading.Thread(target=listen_for_commit, args=(env["REDIS_URL"], channel, box, ready))
        listener.start()
        ready.wait(5)
        pfile = logdir / f"providers-{NEW_RPM}.json"
        pfile.write_text(json.dumps(provider_file(url, NEW_RPM)))
        gw.manage("load_providers", str(pfile), env=env)
        announced = True
        deadline = time.monotonic() + 1.0
        while "commit" not in box and time.monotonic() < deadline:
            time.sleep(0.01)
        if "commit" not in box:  # a gateway that does not announce changes (before pub/sub): mark now,
            announced = False  # when load_providers has exited (a little after its commit)
            box["commit"] = time.monotonic()
            mark()
        time.sleep(10.0)
        box["stop"] = True
        listener.join()
        gw.http.post(f"{gw.url}/api/v1/batches/{batch['id']}/cancel", headers=gw.headers, timeout=30)
    rows = sim.trace()
    marker = [r["arrival_s"] for r in rows if r["tag"] == "marker"]
    arrivals = [r["arrival_s"] for r in rows if r["provider"] == "rl" and r["tag"] != "marker"]
    if not marker:
        raise RuntimeError("no commit announcement seen")
    m = marker[0]
    t = holds_after(arrivals, m, NEW_RPM / 60.0, NEW_RPM / 60.0 * BURST_S)
    before = [a for a in arrivals if m - 2 <= a < m]
    after = [a for a in arrivals if m + 2 <= a < m + 8]
    return {
        "mode": mode,
        "announced": announced,
        "holds_after_s": t - m,
        "rate_before": len(before) / 2.0,
        "rate_after": len(after) / 6.0,
        "run_at": utc_now(),
        "pool": label,
    }


def render(rows: list[dict], meta: dict) -> str:
    lines = [
        *report_header("Live reload: commit → new rate holding at the provider", meta, SHARED_MACHINE),
        f"- scenario: 2 Celery workers ({', '.join(sorted({r.get('pool') or 'prefork pool, -c 1' for r in rows}))}; "
        "PostgreSQL + Redis), one provider without limits of its own; the "
        f"gateway's rpm lowered {OLD_RPM} → {NEW_RPM} (burst {BURST_S:g} s) by `manage.py load_providers` while "
        "a 3,000-item batch runs. *holds after* = from the commit (its pub/sub announcement, placed on the "
        f"simulator's clock by a marker request) until every later request fits a {NEW_RPM} rpm bucket full at "
        "that moment; *rate before / after* = requests/s at the provider in the 2 s before the commit / from "
        "2 to 8 s after it. Issue #10 reported 6.8 s before this change.",
        "",
        "| mode | runs | holds after (s), each run | median | rate before / after (req/s at the provider) |",
        "|---|---|---|---|---|",
    ]
    for mode in sorted({r["mode"] for r in rows}, reverse=True):
        rs = [r for r in rows if r["mode"] == mode]
        each = ", ".join(f"{r['holds_after_s']:.2f}" for r in rs)
        med = statistics.median(r["holds_after_s"] for r in rs)
        rates = ", ".join(f"{r['rate_before']:.1f} / {r['rate_after']:.1f}" for r in rs)
        label = {
            "pubsub": "change event (pub/sub), the default",
            "poll": "poll only (GATEWAY_CONFIG_PUBSUB=0)",
            "before": "before this change (branch base 58b4ea6; commit marked when load_providers exited)",
        }.get(mode, mode)
        lines.append(f"| {label} | {len(rs)} | {each} | {med:.2f} | {rates} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="pubsub,poll")
    ap.add_argument("--runs", type=int, default=3)
    add_output_args(ap)
    ap.add_argument(
        "--render-only", action="store_true", help="rewrite the docs section from the saved results"
    )
    ap.add_argument("--extra-json", action="append", default=[], help="more rows (another results.json)")
    add_worker_args(ap)
    args = ap.parse_args(argv)
    logdir = ROOT / "var" / "bench" / "reload"
    if args.render_only:
        saved = json.loads((logdir / "results.json").read_text())
        rows = saved["rows"] + [
            r for path in args.extra_json for r in json.loads(Path(path).read_text())["rows"]
        ]
        replace_section(Path(args.out), "live-reload", render(rows, saved["meta"]))
        print(f"wrote {args.out}")
        return 0
    from bench.stack import exit_cleanly_on_sigterm

    exit_cleanly_on_sigterm()
    logdir.mkdir(parents=True, exist_ok=True)
    command = command_line("bench/reload.py", argv)
    sim_cfg = {"trace_tag_regex": r"tag-(\w+)", "providers": {"rl": {"median_ms": 50, "sigma": 0.3}}}
    rows = []
    with run_simulator_subprocess(sim_cfg, log_path=logdir / "sim.log") as sim:
        for _ in range(args.runs):
            for mode in args.modes.split(","):
                row = run_one(sim, mode, logdir, (args.worker_pool, args.worker_concurrency))
                print(json.dumps(row), flush=True)
                rows.append(row)
    meta = run_meta(command)
    save_and_publish(logdir / "results.json", meta, rows, args, "live-reload", render(rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Interactive first (issue #22): interactive calls on a provider a big batch saturates.

    .venv/bin/python bench/interactive_first.py                 # writes docs/benchmarks.md
    .venv/bin/python bench/interactive_first.py --measure 90 --interactive-rate 2 --no-write

One provider (the simulator, time_scale 1: --rpm requests per real minute, burst 1.3 s, lognormal
--median-ms latency, max_concurrency 2 × the gateway's), configured in the gateway with the same rpm,
burst_seconds 1 and --max-concurrency. The gateway: PostgreSQL + Redis, gunicorn for the REST API,
--workers × `celery -A gateway_site worker` (Celery's default prefork pool), and the interactive lane
on `uvicorn gateway_site.asgi:application` (1 process). The interactive calls come from
bench/loadgen.py (a process of its own) as an open loop at --interactive-rate calls/s.

Phases: (A) --baseline seconds of interactive calls alone; (B) a --items batch POSTed to
/api/v1/batches; once its requests reach the provider (plus --settle s), --measure s of interactive
calls beside it; then the batch is cancelled. Every request is tagged in its text ([b17], [i4]) and
the simulator traces them (trace_tag_regex), so from the trace:

- interactive queue wait = the call's time to answer (at the caller) − its provider service time
  (the simulator's done − arrival for its request): what the gateway added, quota wait included
- batch throughput = batch requests the provider admitted during phase B / its length, as a fraction of
  what the interactive calls left: (batch req/s) / (rpm/60 − interactive req/s) (goal ≥ 0.9)
- batch requests ahead: per interactive call, the batch requests that reached the provider after the
  call was sent and before the call itself arrived; the issue's bound is max_concurrency +
  ceil(burst_seconds × rpm / 60)
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    SHARED_MACHINE,
    add_output_args,
    command_line,
    fmt_s,
    pct,
    report_header,
    run_meta,
    save_and_publish,
)
from bench.interactive_stack import (  # noqa: E402
    InteractiveStack,
    add_publish_args,
    load_published,
    publish,
    uvicorn_command,
)
from bench.loadgen import LoadGen  # noqa: E402
from bench.stack import add_worker_args, exit_cleanly_on_sigterm  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

TAG_RE = r"\[([bi]\d+)\]"
MODEL = "shared-chat"


def sim_config(args) -> dict:
    return {
        "time_scale": 1,
        "seed": 3,
        "trace_tag_regex": TAG_RE,
        "providers": {
            "shared": {"model": MODEL, "rpm": args.rpm, "tpm": 10_000_000, "burst_seconds": 1.3,
                       "median_ms": args.median_ms, "sigma": 0.3, "max_concurrency": 2 * args.max_concurrency,
                       "completion_tokens": 8},
        },
    }  # fmt: skip


def provider_file(sim_url: str, args) -> dict:
    return {
        "providers": [
            {"name": "shared", "kind": "openai", "base_url": f"{sim_url}/shared/v1", "model": MODEL,
             "rpm": args.rpm, "tpm": 10_000_000, "max_concurrency": args.max_concurrency, "burst_seconds": 1,
             "timeout_seconds": 30, "max_retries": 3, "enabled": True},
        ],
        "routes": [{"route": "chat", "provider": "shared", "priority": 0, "weight": 1}],
    }  # fmt: skip


def batch_items(n: int) -> list[dict]:
    return [
        {"custom_id": f"b{i}", "route": "chat", "query": f"[b{i}] Summarise this support ticket in one line.",
         "params": {"max_tokens": 8}}
        for i in range(1, n + 1)
    ]  # fmt: skip


def interactive_target(gw) -> dict:
    return {
        "url": gw.chat_url,
        "headers": {"Authorization": f"Bearer {gw.key}"},
        "body": {"model": "chat", "messages": [{"role": "user", "content": "[i{n}] Is my order late?"}],
                 "max_tokens": 8},
        "tagged": True,
    }  # fmt: skip


def analyse(calls: list[list], trace: list[dict], t_reset: float, window: tuple[float, float]) -> dict:
    """Interactive calls (loadgen records, perf_counter clock) against the simulator's trace (seconds
    since its reset at perf_counter t_reset)."""
    rows_by_tag: dict[str, list[dict]] = {}
    batch_arrivals = []
    for r in trace:
        if r["tag"] is None:
            continue
        rows_by_tag.setdefault(r["tag"], []).append(r)
        if r["tag"].startswith("b"):
            batch_arrivals.append(r["arrival_s"])
    batch_arrivals.sort()
    waits, lats, ahead, statuses = [], [], [], {}
    for n, _due, sent, done, status, _err in calls:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if status != 200:
            continue
        rows = rows_by_tag.get(f"i{n}") or []
        ok = [r for r in rows if r["status"] == 200]
        if not ok:
            continue
        r = ok[-1]
        first_arrival = min(x["arrival_s"] for x in rows)
        lat = done - sent
        lats.append(lat * 1000)
        waits.append((lat - (r["done_s"] - r["arrival_s"])) * 1000)
        start = sent - t_reset
        ahead.append(
            bisect.bisect_left(batch_arrivals, first_arrival) - bisect.bisect_right(batch_arrivals, start)
        )
    w0, w1 = window
    admitted = [r for r in trace if r["tag"] and r["status"] != 429 and w0 <= r["arrival_s"] < w1]
    batch_n = sum(1 for r in admitted if r["tag"].startswith("b"))
    inter_n = sum(1 for r in admitted if r["tag"].startswith("i"))
    return {
        "calls": len(calls),
        "statuses": statuses,
        "lat_p50": pct(lats, 0.5), "lat_p95": pct(lats, 0.95), "lat_max": max(lats, default=None),
        "wait_p50": pct(waits, 0.5), "wait_p95": pct(waits, 0.95), "wait_max": max(waits, default=None),
        "ahead_p50": pct(ahead, 0.5), "ahead_p95": pct(ahead, 0.95), "ahead_max": max(ahead, default=None),
        "window_s": w1 - w0, "batch_admitted": batch_n, "interactive_admitted": inter_n,
        "batch_rps": batch_n / (w1 - w0), "interactive_rps": inter_n / (w1 - w0),
        "sim_429": sum(1 for r in trace if r["status"] == 429 and w0 <= r["arrival_s"] < w1),
    }  # fmt: skip


def run(args) -> dict:
    logdir = ROOT / "var" / "bench" / "interactive_first"
    logdir.mkdir(parents=True, exist_ok=True)
    cfg = sim_config(args)
    with run_simulator_subprocess(cfg, log_path=logdir / "sim.log") as sim:
        with InteractiveStack(provider_file(sim.base_url, args), logdir, with_gunicorn=True, workers=args.workers,
                              worker_concurrency=args.worker_concurrency, worker_pool=args.worker_pool) as gw, \
                LoadGen({"i": interactive_target(gw)}, logdir) as lg:  # fmt: skip
            pool = gw.pool_label
            lg.run({"op": "closed", "target": "i", "n": 5, "concurrency": 1})  # warm the lane
            t_a = time.perf_counter()
            sim.reset()
            t_reset = (t_a + time.perf_counter()) / 2
            # (A) interactive alone
            a_start = time.perf_counter() - t_reset
            alone = lg.run({"op": "open", "target": "i", "rate": args.interactive_rate, "duration": args.baseline,
                            "record": True})  # fmt: skip
            a_end = time.perf_counter() - t_reset
            # (B) the batch, then interactive calls beside it
            t_post = time.perf_counter()
            batch = gw.submit(batch_items(args.items), timeout=300)
            post_s = time.perf_counter() - t_post
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if sim.counters()["totals"]["requests"] > len(alone["calls"]) + 5:
                    break
                time.sleep(0.2)
            else:
                raise RuntimeError(f"the batch's requests did not reach the provider; see {logdir}")
            time.sleep(args.settle)
            box: dict = {}
            b_start = time.perf_counter() - t_reset
            cmd = {"op": "open", "target": "i", "rate": args.interactive_rate, "duration": args.measure,
                   "record": True}  # fmt: skip
            sender = threading.Thread(target=lambda: box.update(out=lg.run(cmd)))
            sender.start()
            sender.join()
            b_end = time.perf_counter() - t_reset
            status = gw.get(batch["id"])
            counts = status.get("request_counts") or {}
            gw.http.post(f"{gw.url}/api/v1/batches/{batch['id']}/cancel", headers=gw.headers, timeout=30)
            trace = sim.trace()
            counters = sim.counters()
            db_rows = interactive_log(gw)
    side = box["out"]
    res = {
        "alone": analyse(alone["calls"], trace, t_reset, (a_start, a_end)),
        "beside": analyse(side["calls"], trace, t_reset, (b_start, b_end)),
        "batch_status_at_end": status.get("status"),
        "batch_counts_at_end": counts,
        "post_s": post_s,
        "sim_totals": {k: counters["totals"][k] for k in ("requests", "rate_limited_429", "status_5xx")},
        "sim_max_in_flight": counters["providers"]["shared"]["max_in_flight"],
        "pool": pool,
        "request_log": db_rows,
    }
    cap = args.rpm / 60
    b = res["beside"]
    res["capacity_left"] = cap - b["interactive_rps"]
    res["fraction"] = b["batch_rps"] / res["capacity_left"] if res["capacity_left"] > 0 else None
    res["bound"] = args.max_concurrency + math.ceil(1 * args.rpm / 60)
    return res


def interactive_log(gw) -> dict:
    """What the gateway's request log (interactive_interactivecall) says about the calls."""
    code = (
        "import json\n"
        "from interactive.models import InteractiveCall as C\n"
        "q = list(C.objects.values_list('latency_ms', 'queue_ms', 'status'))\n"
        "print(json.dumps({'rows': len(q), 'queue_ms_filled': sum(1 for r in q if r[1] is not None),"
        " 'latency_ms': sorted(r[0] for r in q if r[0] is not None),"
        " 'queue_ms': sorted(r[1] for r in q if r[1] is not None), 'statuses': sorted({r[2] for r in q})}))\n"
    )
    try:
        out = gw.manage("shell", "-c", code, env=gw._env).strip().splitlines()[-1]
        data = json.loads(out)
    except Exception as exc:  # noqa: BLE001 - only a cross-check
        return {"error": str(exc)[:200]}
    lat, queue = data.pop("latency_ms"), data.pop("queue_ms", [])
    data["latency_ms_p50"], data["latency_ms_p95"] = pct(lat, 0.5), pct(lat, 0.95)
    data["queue_ms_p50"], data["queue_ms_p95"] = pct(queue, 0.5), pct(queue, 0.95)
    data["queue_ms_max"] = max(queue, default=None)
    return data


def render(res: dict, meta: dict, args) -> str:
    lines = report_header("Interactive first: interactive calls beside a saturating batch (issue #22)", meta,
                          SHARED_MACHINE)  # fmt: skip
    a, b = res["alone"], res["beside"]
    lines += [
        f"- provider: the simulator, time_scale 1, rpm {args.rpm} ({args.rpm / 60:g}/s), burst 1.3 s, latency "
        f"median {args.median_ms} ms (sigma 0.3); the gateway: rpm {args.rpm}, burst_seconds 1, "
        f"max_concurrency {args.max_concurrency}",
        f"- gateway: PostgreSQL + Redis; REST API on gunicorn; {args.workers} × `celery -A gateway_site worker` "
        f"({res['pool']}); interactive lane on `{meta['uvicorn']}`",
        f"- batch: {args.items} items POSTed to /api/v1/batches ({res['post_s']:.1f} s), cancelled after the "
        f"measurement ({res['batch_counts_at_end'].get('completed', '?')} completed by then); interactive: "
        f"bench/loadgen.py open loop at {args.interactive_rate}/s, {args.baseline:g} s alone, then "
        f"{args.measure:g} s beside the batch (from {args.settle:g} s after its first requests reached the provider)",
        "",
        "| phase | interactive calls (statuses) | time to answer p50 / p95 / max (ms) | queue wait p50 / p95 / max (ms) "
        "| batch requests ahead p50 / p95 / max (bound) | batch admitted req/s | interactive admitted req/s | 429s at provider |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, d in (("alone", a), ("beside the batch", b)):
        st = ", ".join(f"{k}: {v}" for k, v in sorted(d["statuses"].items()))
        lines.append(
            f"| {name} | {d['calls']} ({st}) | {fmt_s(d['lat_p50'], 0)} / {fmt_s(d['lat_p95'], 0)} / "
            f"{fmt_s(d['lat_max'], 0)} | {fmt_s(d['wait_p50'], 1)} / {fmt_s(d['wait_p95'], 1)} / "
            f"{fmt_s(d['wait_max'], 1)} | {fmt_s(d['ahead_p50'], 0)} / {fmt_s(d['ahead_p95'], 0)} / "
            f"{fmt_s(d['ahead_max'], 0)} ({res['bound']}) | {d['batch_rps']:.2f} | {d['interactive_rps']:.2f} | "
            f"{d['sim_429']} |"
        )
    frac = res["fraction"]
    lines += [
        "",
        f"- batch throughput beside the interactive calls: {b['batch_rps']:.2f} req/s of the "
        f"{res['capacity_left']:.2f} req/s they left ({args.rpm / 60:g} − {b['interactive_rps']:.2f}): "
        f"**{fmt_s(frac)}** (goal ≥ 0.9: {'met' if frac is not None and frac >= 0.9 else 'missed'})",
        f"- batch requests ahead of an interactive call: max {fmt_s(b['ahead_max'], 0)} against the bound "
        f"max_concurrency + ceil(burst_seconds × rpm/60) = {args.max_concurrency} + {math.ceil(args.rpm / 60)} = "
        f"{res['bound']} ({'within' if (b['ahead_max'] or 0) <= res['bound'] else 'over'})",
        f"- the simulator over the whole run: {res['sim_totals']['requests']} requests, "
        f"{res['sim_totals']['rate_limited_429']} 429s, {res['sim_totals']['status_5xx']} 5xx, max in flight "
        f"{res['sim_max_in_flight']}",
        "- *queue wait* = time to answer at the caller − the provider's service time for that call (trace "
        "done − arrival): the quota wait plus the gateway's own overhead; *batch requests ahead* counts batch "
        "requests reaching the provider after the call was sent and before it arrived",
    ]
    log = res["request_log"]
    if "rows" in log:
        lines.append(
            f"- the gateway's request log (interactive_interactivecall): {log['rows']} rows, latency_ms p50 / "
            f"p95 {fmt_s(log['latency_ms_p50'], 0)} / {fmt_s(log['latency_ms_p95'], 0)}; queue_ms filled in "
            f"{log['queue_ms_filled']} of them"
            + (
                f" (p50 / p95 / max {fmt_s(log.get('queue_ms_p50'), 0)} / {fmt_s(log.get('queue_ms_p95'), 0)} / "
                f"{fmt_s(log.get('queue_ms_max'), 0)} ms, both phases)"
                if log.get("queue_ms_filled")
                else ""
            )
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--median-ms", type=float, default=150)
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interactive-rate", type=float, default=2.0)
    ap.add_argument("--baseline", type=float, default=20.0, help="seconds of interactive calls alone")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after the batch's first requests")
    ap.add_argument(
        "--measure", type=float, default=60.0, help="seconds of interactive calls beside the batch"
    )
    ap.add_argument("--json", default=None)
    add_worker_args(ap)
    add_output_args(ap)
    add_publish_args(ap)
    args = ap.parse_args(argv)
    if args.publish:
        meta, saved, run_args = load_published(ap, args.publish)
        publish(render(saved[0], meta, run_args), args, "interactive-first")
        return 0
    exit_cleanly_on_sigterm()
    res = run(args)
    meta = run_meta(command_line("bench/interactive_first.py", argv), uvicorn=uvicorn_command(1))
    text = render(res, meta, args)
    print(text)
    path = (
        Path(args.json)
        if args.json
        else ROOT / "var" / "bench" / "interactive_first" / "interactive_first.json"
    )
    save_and_publish(path, meta, [res], args, args.marker or "interactive-first", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Added latency of the interactive lane (issue #22): POST /v1/chat/completions through the gateway
(the ASGI app on uvicorn) against the same call sent straight to a ~1 ms simulated provider.

    .venv/bin/python bench/interactive_latency.py                          # 1 uvicorn process, writes docs
    .venv/bin/python bench/interactive_latency.py --uvicorn-workers 1,2    # a row set per setting
    .venv/bin/python bench/interactive_latency.py --parts stream           # streaming: TTFT, chunk gaps
    .venv/bin/python bench/interactive_latency.py --profile 500 --no-write # py-spy on the 500/s step

Pieces, each a process of its own: the simulator (`python -m sim`: one openai-kind provider, 1 ms
latency with sigma 0, no rpm/tpm limit, max_concurrency 10000), the gateway (bench.interactive_stack:
PostgreSQL + Redis quota store, `uvicorn gateway_site.asgi:application`, no Celery worker: nothing
batch runs), and the load generator (bench/loadgen.py: aiohttp on uvloop, one keep-alive pool per
target). The gateway's provider: the simulator, rpm 1,000,000, tpm 10^9, max_concurrency 10000.

Steps: "1 in flight" (a closed loop, one caller), then open loops at each --rates value (requests due at
fixed intervals, latency counted from the due time). Each step alternates windows of direct and gateway
traffic (direct, gw, gw, direct, direct, gw, … — --windows per target, --window seconds each), so both
see the same machine load drift; *added* = gateway percentile − direct percentile over the step's
pooled windows (the calls are not paired, so this is a difference of percentiles). Failures: any
answer but a 200 (or a transport error / 30 s timeout).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
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
    pct,
    report_header,
    run_meta,
    save_and_publish,
)
from bench.interactive_stack import (  # noqa: E402
    InteractiveStack,
    add_publish_args,
    cpu_seconds,
    load_published,
    publish,
    uvicorn_command,
)
from bench.loadgen import LoadGen  # noqa: E402
from bench.stack import exit_cleanly_on_sigterm  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

MODEL = "fast-1ms"
GOAL_P99_MS, GOAL_RATE, GOAL_NO_FAIL_RATE = 10.0, 500, 1000
SATURATED_MS = 1000.0


def sim_config(stream_chunks: int | None = None, chunk_delay_ms: float | None = None) -> dict:
    p = {"model": MODEL, "median_ms": 1, "sigma": 0, "completion_tokens": 4, "max_concurrency": 10000}
    if stream_chunks is not None:
        p["stream_chunks"] = stream_chunks
    if chunk_delay_ms is not None:
        p["chunk_delay_ms"] = chunk_delay_ms
    return {"time_scale": 1, "seed": 1, "providers": {"fast": p}}


def provider_file(sim_url: str) -> dict:
    return {
        "providers": [
            {"name": "fast", "kind": "openai", "base_url": f"{sim_url}/fast/v1", "model": MODEL,
             "rpm": 1_000_000, "tpm": 1_000_000_000, "max_concurrency": 10_000, "burst_seconds": 60,
             "timeout_seconds": 30, "max_retries": 3, "enabled": True},
        ],
        "routes": [{"route": "echo", "provider": "fast", "priority": 0, "weight": 1}],
    }  # fmt: skip


def targets(sim_url: str, gw) -> dict:
    body = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    return {
        "direct": {"url": f"{sim_url}/fast/v1/chat/completions", "body": {"model": MODEL, **body}},
        "gw": {"url": gw.chat_url, "headers": {"Authorization": f"Bearer {gw.key}"},
               "body": {"model": "echo", **body}},
    }  # fmt: skip


def order(windows: int) -> list[str]:
    """direct, gw, gw, direct, direct, gw, … : `windows` of each, balanced against drift."""
    seq = []
    for i in range(windows):
        seq += ["direct", "gw"] if i % 2 == 0 else ["gw", "direct"]
    return seq


def merge(parts: list[dict]) -> dict:
    out = {"n": 0, "ok": 0, "fail": 0, "errors": {}, "lat_ms": [], "lag_ms": []}
    for p in parts:
        out["n"] += p["n"]
        out["ok"] += p["ok"]
        out["fail"] += p["fail"]
        out["lat_ms"] += p["lat_ms"]
        out["lag_ms"] += p.get("lag_ms", [])
        for k, v in p["errors"].items():
            out["errors"][k] = out["errors"].get(k, 0) + v
    return out


def summary(m: dict) -> dict:
    return {
        "n": m["n"], "ok": m["ok"], "fail": m["fail"], "errors": m["errors"],
        "p50": pct(m["lat_ms"], 0.5), "p99": pct(m["lat_ms"], 0.99), "max": max(m["lat_ms"], default=None),
        "lag_p99": pct(m["lag_ms"], 0.99) if m["lag_ms"] else None,
    }  # fmt: skip


class Profiler:
    """py-spy record on the serving processes for the duration of the gateway windows of one step."""

    def __init__(self, pids: list[int], outdir: Path, label: str, gil: bool = False):
        self.pids, self.outdir, self.gil = pids, outdir, gil
        self.label = "".join(c if c.isalnum() else "-" for c in label)
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for pid in self.pids:
            for fmt, ext in (("raw", "txt"), ("speedscope", "json")):
                out = self.outdir / f"pyspy-{self.label}-{pid}.{ext}"
                self.procs.append(subprocess.Popen(
                    [py_spy, "record", "--pid", str(pid), "--rate", "250", "--format", fmt, "--output",
                     str(out), "--nonblocking", *(["--gil"] if self.gil else [])],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                ))  # fmt: skip
                break  # raw only: one sampler per process (two would double the sampling cost)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs = []


def run_step(lg: LoadGen, gw, label: str, cmd: dict, windows: int, profiler: Profiler | None = None) -> dict:
    parts: dict[str, list[dict]] = {"direct": [], "gw": []}
    cpu, gw_wall = 0.0, 0.0
    for target in order(windows):
        if target == "gw" and profiler is not None:
            profiler.start()
        c0, t0 = cpu_seconds(gw.uvicorn_pids()), time.monotonic()
        parts[target].append(lg.run({**cmd, "target": target}))
        if target == "gw":
            cpu += cpu_seconds(gw.uvicorn_pids()) - c0
            gw_wall += time.monotonic() - t0
            if profiler is not None:
                profiler.stop()
    d, g = summary(merge(parts["direct"])), summary(merge(parts["gw"]))
    row = {
        "step": label, **{k: v for k, v in cmd.items() if k != "op"},
        "direct": d, "gw": g,
        "added_p50": None if g["p50"] is None or d["p50"] is None else g["p50"] - d["p50"],
        "added_p99": None if g["p99"] is None or d["p99"] is None else g["p99"] - d["p99"],
        "gw_cpu_ms_per_call": 1000 * cpu / max(1, g["n"]),
        "gw_cpu_util": cpu / gw_wall if gw_wall else None,
    }  # fmt: skip
    print(
        f"{label:>10}: direct p50 {fmt_s(d['p50'])} p99 {fmt_s(d['p99'])} | gw p50 {fmt_s(g['p50'])} "
        f"p99 {fmt_s(g['p99'])} | added p50 {fmt_s(row['added_p50'])} p99 {fmt_s(row['added_p99'])} ms | "
        f"gw fail {g['fail']} {g['errors'] or ''} direct fail {d['fail']} | gw CPU "
        f"{row['gw_cpu_ms_per_call']:.2f} ms/call",
        flush=True,
    )
    return row


def latency_rows(sim, gw, lg: LoadGen, args, label: str, logdir: Path) -> list[dict]:
    lg.run({"op": "closed", "target": "direct", "n": 300, "concurrency": 1})
    lg.run({"op": "closed", "target": "gw", "n": 300, "concurrency": 1})
    lg.run({"op": "open", "target": "direct", "rate": 50, "duration": args.warmup})
    lg.run({"op": "open", "target": "gw", "rate": 50, "duration": args.warmup})
    rows = []
    if not args.skip_closed:
        per = max(1, args.closed_calls // args.windows)
        prof = (
            Profiler(gw.uvicorn_pids(), logdir, f"{label}-closed", args.gil)
            if args.profile == "closed"
            else None
        )
        rows.append(run_step(lg, gw, "1 in flight", {"op": "closed", "n": per, "concurrency": 1}, args.windows,
                             prof))  # fmt: skip
    saturated = False
    for rate in args.rate_list:
        prof = (
            Profiler(gw.uvicorn_pids(), logdir, f"{label}-{rate}", args.gil)
            if args.profile == str(rate)
            else None
        )
        cmd = {"op": "open", "rate": rate, "duration": args.window}
        # past a step the gateway could not keep up with (p50 over SATURATED_MS) one window per target
        # is enough to show the backlog, and the backlog of four would take minutes to drain
        windows = 1 if saturated else args.windows
        rows.append(run_step(lg, gw, f"{rate}/s" + (" (1 window)" if windows < args.windows else ""), cmd,
                             windows, prof))  # fmt: skip
        rows[-1]["windows"] = windows
        saturated = saturated or (rows[-1]["gw"]["p50"] or 0) > SATURATED_MS
    for r in rows:
        r["setting"] = label
    return rows


def stream_rows(sim, gw, lg: LoadGen, args, label: str) -> list[dict]:
    lg.run({"op": "stream", "target": "direct", "n": 20, "concurrency": 1})
    lg.run({"op": "stream", "target": "gw", "n": 20, "concurrency": 1})
    parts: dict[str, list[dict]] = {"direct": [], "gw": []}
    per = max(1, args.stream_calls // args.windows)
    for target in order(args.windows):
        parts[target].append(lg.run({"op": "stream", "target": target, "n": per,
                                     "concurrency": args.stream_concurrency}))  # fmt: skip
    out = {}
    for target, ps in parts.items():
        ttft = [x for p in ps for x in p["ttft_ms"]]
        gaps = [x for p in ps for x in p["gap_ms"]]
        lat = [x for p in ps for x in p["lat_ms"]]
        out[target] = {
            "n": sum(p["n"] for p in ps), "ok": sum(p["ok"] for p in ps), "fail": sum(p["fail"] for p in ps),
            "errors": merge(ps)["errors"], "chunks_median": pct([c for p in ps for c in p["chunks"]], 0.5),
            "ttft_p50": pct(ttft, 0.5), "ttft_p99": pct(ttft, 0.99),
            "gap_p50": pct(gaps, 0.5), "gap_p99": pct(gaps, 0.99),
            "total_p50": pct(lat, 0.5), "total_p99": pct(lat, 0.99),
        }  # fmt: skip
    d, g = out["direct"], out["gw"]
    row = {"setting": label, "concurrency": args.stream_concurrency, "direct": d, "gw": g}
    for k in ("ttft_p50", "ttft_p99", "gap_p50", "gap_p99", "total_p50", "total_p99"):
        row[f"added_{k}"] = None if d[k] is None or g[k] is None else g[k] - d[k]
    print(json.dumps({k: v for k, v in row.items() if k.startswith("added")}), flush=True)
    return [row]


def best_rate(rows: list[dict]) -> str:
    ok = [r for r in rows if r["step"] != "1 in flight" and r["added_p99"] is not None
          and r["added_p99"] <= GOAL_P99_MS and r["gw"]["fail"] == 0]  # fmt: skip
    return f"{max(int(r['rate']) for r in ok)}/s" if ok else "none of the rates"


def render(rows: list[dict], srows: list[dict], meta: dict) -> str:
    title = meta.get("title") or ("added latency" if rows else "streaming, added time to first token")
    lines = report_header(
        f"Interactive lane: {title} against a ~1 ms provider (issue #22)", meta, SHARED_MACHINE
    )
    lines += [
        f"- gateway: `{meta['uvicorn']}` per setting below, DJANGO_SETTINGS_MODULE=gateway_site.settings.local, "
        "DJANGO_DEBUG=0, PostgreSQL + Redis (quota store, shared breaker), no Celery worker; the loader and "
        "the simulator in processes of their own on the same 2 cores",
        "- provider: the simulator, one openai-kind provider, 1 ms latency (sigma 0), no limits; the gateway "
        "configures it with rpm 1,000,000, max_concurrency 10,000; body `{model, messages: [ping], max_tokens: 4}`",
        f"- load: bench/loadgen.py (aiohttp + uvloop, a separate process); per step {meta['windows']} windows "
        f"per target, alternating direct / gateway (ABBA), after a warm-up",
        "- *added* = gateway percentile − direct percentile of the same step (interleaved windows, not paired "
        "calls); *gw CPU* = CPU time of the uvicorn worker process(es) per gateway call (the loader's, the "
        "simulator's, PostgreSQL's and Redis's CPU not included)",
    ]
    if rows:
        lines += latency_table(rows, meta)
    if srows:
        lines += stream_table(srows, meta)
    return "\n".join(lines) + "\n"


def latency_table(rows: list[dict], meta: dict) -> list[str]:
    closed = any(r["step"] == "1 in flight" for r in rows)
    lines = [
        "- steps: "
        + (
            f"'1 in flight' is a closed loop of one caller ({meta['closed_calls']} calls per target); "
            if closed
            else ""
        )
        + f"open loops of {meta['window']} s windows count latency from each request's due time; a step "
        f"after one whose gateway p50 passed {SATURATED_MS:.0f} ms (saturated) runs 1 window per target: the "
        "backlog of more would take minutes to drain; in a saturated step the CPU per call is not meaningful "
        "(calls the loader gave up on are still served after the window)",
        "",
        "| setting | step | direct p50 / p99 (ms) | gateway p50 / p99 (ms) | added p50 (ms) | added p99 (ms) "
        "| gateway calls ok / failed | direct failed | loader late p99 (ms) gw / direct | gw CPU per call (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d, g = r["direct"], r["gw"]
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(g["errors"].items()))
        lines.append(
            f"| {r['setting']} | {r['step']} | {fmt_s(d['p50'])} / {fmt_s(d['p99'])} | {fmt_s(g['p50'])} / "
            f"{fmt_s(g['p99'])} | {fmt_s(r['added_p50'])} | **{fmt_s(r['added_p99'])}** | {g['ok']} / "
            f"{g['fail']}{f' ({errs})' if errs else ''} | {d['fail']} | {fmt_s(g['lag_p99'])} / "
            f"{fmt_s(d['lag_p99'])} | {r['gw_cpu_ms_per_call']:.2f} |"
        )
    lines.append("")
    for setting in dict.fromkeys(r["setting"] for r in rows):
        sub = [r for r in rows if r["setting"] == setting]
        at_goal = [r for r in sub if r.get("rate") == GOAL_RATE]
        at_top = [r for r in sub if r.get("rate") == GOAL_NO_FAIL_RATE]
        parts = [f"highest rate with added p99 ≤ {GOAL_P99_MS:.0f} ms and no failure: {best_rate(sub)}"]
        if at_goal:
            a = at_goal[0]["added_p99"]
            met = "met" if a is not None and a <= GOAL_P99_MS else "missed"
            parts.append(f"goal added p99 ≤ {GOAL_P99_MS:.0f} ms at {GOAL_RATE}/s: {met} ({fmt_s(a)} ms)")
        if at_top:
            t = at_top[0]
            f, secs = t["gw"]["fail"], t["gw"]["n"] / t["rate"]
            verdict = "no failure" if f == 0 else f"missed ({f} of {t['gw']['n']} failed)"
            parts.append(f"goal no failures at {GOAL_NO_FAIL_RATE}/s: {verdict} over {secs:g} s of it "
                         f"(gateway p99 {fmt_s(t['gw']['p99'], 0)} ms)")  # fmt: skip
        lines.append(f"- {setting}: " + "; ".join(parts))
    lines.append(
        "- anchor (not measured here): TensorZero's published benchmark of LiteLLM's proxy on 4 vCPU gives "
        "added p99 5.9 ms at 100 QPS, 39.7 ms at 500 QPS, and failures at 1,000 QPS"
    )
    return lines


def stream_table(srows: list[dict], meta: dict) -> list[str]:
    lines = [
        "",
        "Streaming (`stream: true`, closed loop): time to first content chunk (TTFT) and the gaps between "
        "content chunks, gateway vs direct, same interleaving",
        "",
        "| setting | callers | chunks per call | TTFT p50 / p99 direct (ms) | TTFT p50 / p99 gateway (ms) | "
        "added TTFT p50 / p99 (ms) | chunk gap p50 / p99 direct (ms) | chunk gap p50 / p99 gateway (ms) | "
        "added whole call p50 / p99 (ms) | failed gw / direct |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in srows:
        d, g = r["direct"], r["gw"]
        lines.append(
            f"| {r['setting']} | {r['concurrency']} | {fmt_s(g['chunks_median'], 0)} | {fmt_s(d['ttft_p50'])} / "
            f"{fmt_s(d['ttft_p99'])} | {fmt_s(g['ttft_p50'])} / {fmt_s(g['ttft_p99'])} | "
            f"{fmt_s(r['added_ttft_p50'])} / {fmt_s(r['added_ttft_p99'])} | {fmt_s(d['gap_p50'])} / "
            f"{fmt_s(d['gap_p99'])} | {fmt_s(g['gap_p50'])} / {fmt_s(g['gap_p99'])} | "
            f"{fmt_s(r['added_total_p50'])} / {fmt_s(r['added_total_p99'])} | {g['fail']} / {d['fail']} |"
        )
    lines.append(
        f"- stream simulator provider: `{meta.get('stream_sim')}`; calls per target: {meta.get('stream_calls')}"
    )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="latency", help="latency,stream")
    ap.add_argument("--rates", default="20,50,100,200,500,1000", help="open-loop steps, requests/s")
    ap.add_argument("--window", type=float, default=2.5, help="seconds per window")
    ap.add_argument("--windows", type=int, default=4, help="windows per target per step")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of 200/s per target before the steps")
    ap.add_argument("--closed-calls", type=int, default=2000, help="'1 in flight' calls per target")
    ap.add_argument("--skip-closed", action="store_true")
    ap.add_argument(
        "--uvicorn-workers", default="1", help="comma list: a row set per value (uvicorn --workers)"
    )
    ap.add_argument("--uvicorn-arg", action="append", default=[], help="more uvicorn arguments (repeatable)")
    ap.add_argument(
        "--profile",
        default=None,
        metavar="RATE|closed",
        help="py-spy record (raw, collapsed stacks) the serving processes during that step's gateway "
        "windows, into var/bench/interactive_latency/pyspy-*.txt",
    )
    ap.add_argument("--gil", action="store_true", help="py-spy --gil: only the thread holding the GIL")  # fmt: skip
    ap.add_argument("--stream-calls", type=int, default=400, help="streaming calls per target")
    ap.add_argument("--stream-concurrency", type=int, default=1)
    ap.add_argument("--stream-chunks", type=int, default=20, help="the simulator's stream_chunks")
    ap.add_argument("--chunk-delay-ms", type=float, default=5.0, help="the simulator's chunk_delay_ms")
    ap.add_argument(
        "--json", default=None, help="where to save the rows (default var/bench/interactive_latency/)"
    )
    ap.add_argument("--title", default=None, help="the section title's middle part (default: added latency)")
    add_output_args(ap)
    add_publish_args(ap)
    args = ap.parse_args(argv)
    if args.publish:
        meta, saved, _run = load_published(ap, args.publish)
        meta["title"] = args.title or meta.get("title")
        rows, srows = [r for r in saved if "step" in r], [r for r in saved if "step" not in r]
        publish(render(rows, srows, meta), args, "interactive-latency" if rows else "interactive-stream")
        return 0
    args.rate_list = [int(x) for x in args.rates.split(",") if x]
    exit_cleanly_on_sigterm()
    parts = set(args.parts.split(","))
    logdir = ROOT / "var" / "bench" / "interactive_latency"
    logdir.mkdir(parents=True, exist_ok=True)
    stream_cfg = sim_config(args.stream_chunks, args.chunk_delay_ms) if "stream" in parts else sim_config()
    rows, srows = [], []
    with run_simulator_subprocess(stream_cfg, log_path=logdir / "sim.log") as sim:
        for w in [int(x) for x in args.uvicorn_workers.split(",")]:
            label = "uvicorn, 1 process" if w == 1 else f"uvicorn --workers {w}"
            with InteractiveStack(provider_file(sim.base_url), logdir / f"w{w}", uvicorn_workers=w,
                                  uvicorn_extra=args.uvicorn_arg) as gw, \
                    LoadGen(targets(sim.base_url, gw), logdir) as lg:  # fmt: skip
                print(f"== {label}: {gw.asgi_url}, serving pids {gw.uvicorn_pids()}", flush=True)
                if "latency" in parts:
                    rows += latency_rows(sim, gw, lg, args, label, logdir)
                if "stream" in parts:
                    srows += stream_rows(sim, gw, lg, args, label)
    meta = run_meta(
        command_line("bench/interactive_latency.py", argv),
        uvicorn=uvicorn_command(1, args.uvicorn_arg) + " [--workers N]",
        window=args.window, windows=args.windows, closed_calls=args.closed_calls, title=args.title,
        stream_sim=json.dumps(stream_cfg["providers"]["fast"]) if srows else None, stream_calls=args.stream_calls,
    )  # fmt: skip
    text = render(rows, srows, meta)
    print(text)
    marker = "interactive-latency" if rows else "interactive-stream"
    save_and_publish(Path(args.json) if args.json else logdir / f"{marker}.json", meta, rows + srows, args,
                     args.marker or marker, text)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

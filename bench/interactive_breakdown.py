"""Where an interactive call's CPU goes (issue #22): the same call measured at three depths, one caller
at a time, interleaved for --rounds rounds, against the ~1 ms simulated provider of
bench/interactive_latency.py.

    .venv/bin/python bench/interactive_breakdown.py [--calls 1000] [--rounds 2] [--no-write]

- check: `calls.read_body` + `calls.prepare` (body checks, the engine item) in a process of its own
  (the stack's environment, uvloop), no I/O
- engine: check + `InteractiveLane.complete` in that process: breaker, admission (Redis quota store),
  the provider call (aiohttp), the outcome — no web server, no auth, no answer, no call log
- http: the whole call through `uvicorn gateway_site.asgi:application` (1 process) from bench/loadgen.py
- direct: the provider straight from bench/loadgen.py (wall time only)

CPU ms per call = the measuring process's CPU (check, engine: time.process_time of that process; http:
the uvicorn process's user + system time from /proc) over the calls; wall ms per call = elapsed / calls.
http − engine is the web side's CPU (uvicorn, Django's ASGI handler, the middleware, auth, the JSON
answer, the request log).
"""

from __future__ import annotations

import argparse
import json
import os
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

BODY = {"model": "echo", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}


def in_process(n: int, mode: str) -> dict:
    """Run in the stack's environment: n calls of check (mode "check") or check + lane.complete."""
    os.environ["GATEWAY_ASGI"] = "1"
    import django

    django.setup()
    import uvloop

    from batches.submission.caps import Limits
    from interactive import calls
    from interactive.lane import current_lane, targets

    raw = json.dumps(BODY).encode()

    async def main() -> dict:
        known, _ = await targets.current()
        lane = current_lane()
        limits = Limits.from_settings()

        async def one() -> None:
            body = calls.read_body(raw, limits.max_body_bytes)
            call = calls.prepare(
                body, team="bench", targets=known, limits=limits, wait=30.0, raw_size=len(raw)
            )
            if mode == "engine":
                result = await lane.complete(call.item)
                assert result.ok, result.error_message

        for _ in range(200):  # warm: connections, caches
            await one()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            await one()
        c1, t1 = time.process_time(), time.perf_counter()
        await lane.aclose()
        return {"cpu_ms": 1000 * (c1 - c0) / n, "wall_ms": 1000 * (t1 - t0) / n}

    return uvloop.run(main())


def render(rows: list[dict], meta: dict) -> str:
    lines = report_header("Interactive lane: where a call's CPU goes (issue #22)", meta, SHARED_MACHINE)
    lines += [
        f"- {meta['calls']} calls per depth per round, one caller at a time, {meta['rounds']} rounds interleaved; "
        f"provider: the simulator's 1 ms openai-kind provider (bench/interactive_latency.py); gateway: "
        f"`{meta['uvicorn']}`, PostgreSQL + Redis",
        "",
        "| depth | what runs | CPU ms per call (rounds) | wall ms per call (rounds) |",
        "|---|---|---|---|",
    ]
    what = {
        "check": "calls.read_body + calls.prepare, in-process",
        "engine": "check + InteractiveLane.complete (breaker, Redis quota store, aiohttp to the provider), in-process",
        "http": "the whole call through uvicorn gateway_site.asgi:application",
        "direct": "the provider straight from the loader",
    }
    for depth in ("check", "engine", "http", "direct"):
        rs = [r for r in rows if r["depth"] == depth]
        cpu = " / ".join(fmt_s(r.get("cpu_ms")) for r in rs)
        wall = " / ".join(fmt_s(r.get("wall_ms")) for r in rs)
        lines.append(f"| {depth} | {what[depth]} | {cpu} | {wall} |")
    eng = [r["cpu_ms"] for r in rows if r["depth"] == "engine"]
    http = [r["cpu_ms"] for r in rows if r["depth"] == "http"]
    if eng and http:
        web = [h - e for h, e in zip(http, eng, strict=False)]
        lines.append("")
        lines.append(
            "- the web side's CPU per call (http − engine, per round): "
            + " / ".join(f"{w:.2f} ms" for w in web)
            + " — uvicorn, Django's ASGI handler, the middleware, auth, the JSON answer and the request log"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--_in-process", dest="in_process", default=None, help=argparse.SUPPRESS)
    add_publish_args(ap)
    add_output_args(ap)
    args = ap.parse_args(argv)
    if args.in_process:
        print(json.dumps(in_process(args.calls, args.in_process)))
        return 0
    if args.publish:
        meta, saved, _run = load_published(ap, args.publish)
        publish(render(saved, meta), args, "interactive-breakdown")
        return 0
    from bench.interactive_latency import provider_file, sim_config, targets
    from bench.loadgen import LoadGen
    from bench.stack import PY, exit_cleanly_on_sigterm
    from sim.testing import run_simulator_subprocess

    exit_cleanly_on_sigterm()
    logdir = ROOT / "var" / "bench" / "interactive_breakdown"
    logdir.mkdir(parents=True, exist_ok=True)
    rows = []
    with run_simulator_subprocess(sim_config(), log_path=logdir / "sim.log") as sim:
        with InteractiveStack(provider_file(sim.base_url), logdir) as gw, \
                LoadGen(targets(sim.base_url, gw), logdir) as lg:  # fmt: skip
            lg.run({"op": "closed", "target": "gw", "n": 200, "concurrency": 1})
            for rnd in range(1, args.rounds + 1):
                for depth in ("check", "engine"):
                    out = subprocess.run(
                        [PY, __file__, "--_in-process", depth, "--calls", str(args.calls)],
                        env=gw._env, cwd=ROOT, capture_output=True, text=True, timeout=600,
                    )  # fmt: skip
                    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                    if not lines:
                        raise RuntimeError(f"{depth}: {out.stderr[-2000:]}")
                    rows.append({"round": rnd, "depth": depth, **json.loads(lines[-1])})
                c0 = cpu_seconds(gw.uvicorn_pids())
                r = lg.run({"op": "closed", "target": "gw", "n": args.calls, "concurrency": 1})
                cpu = cpu_seconds(gw.uvicorn_pids()) - c0
                rows.append({"round": rnd, "depth": "http", "cpu_ms": 1000 * cpu / args.calls,
                             "wall_ms": 1000 * r["wall_s"] / args.calls, "fail": r["fail"]})  # fmt: skip
                d = lg.run({"op": "closed", "target": "direct", "n": args.calls, "concurrency": 1})
                rows.append({"round": rnd, "depth": "direct", "wall_ms": 1000 * d["wall_s"] / args.calls})
                for row in rows[-4:]:
                    print(json.dumps(row), flush=True)
    meta = run_meta(command_line("bench/interactive_breakdown.py", argv), uvicorn=uvicorn_command(1),
                    calls=args.calls, rounds=args.rounds)  # fmt: skip
    text = render(rows, meta)
    print(text)
    path = Path(args.json) if args.json else logdir / "interactive_breakdown.json"
    save_and_publish(path, meta, rows, args, args.marker or "interactive-breakdown", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Three LangChain processes at once on one tight provider (issue #22): through the gateway's
/v1/chat/completions, and pointed at the provider directly.

    .venv/bin/python bench/langchain_three.py                 # both rows, writes docs/benchmarks.md
    .venv/bin/python bench/langchain_three.py --runs 2 --no-write

Each of --processes processes runs LangChain's own code, unchanged but for where it points:

    llm = ChatOpenAI(base_url=<gateway>/v1, api_key=<team key>, model="chat")     # row "gateway"
    llm = ChatOpenAI(base_url=<simulator>/tight/v1, api_key="sk-sim", model=...)  # row "direct"
    llm.batch(prompts, return_exceptions=True)                                     # --prompts prompts

(`return_exceptions=True` so one failed prompt does not hide the others' answers: the default raises
at the first failure.) ChatOpenAI's defaults otherwise: the openai SDK's 2 retries (it honours
Retry-After), `.batch()`'s thread pool (max_concurrency unset: min(32, CPUs + 4) threads). The
processes start together (a shared start time). The provider: the simulator at time_scale 1, --rpm
requests per minute (burst 1.3 s), lognormal --median-ms latency, max_concurrency 64; the gateway
configures it with the same rpm, burst_seconds 1, max_concurrency 16, and the interactive lane on
`uvicorn gateway_site.asgi:application` (1 process), PostgreSQL + Redis. The rows alternate (direct,
gateway, gateway, direct, …) for --runs rounds; the simulator's counters are reset before each.
"""

from __future__ import annotations

import argparse
import json
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
    load_published,
    publish,
    uvicorn_command,
)
from bench.stack import exit_cleanly_on_sigterm  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

MODEL = "tight-chat"


def prompts(proc: int, n: int) -> list[str]:
    return [f"[p{proc}-{i}] Answer in one word: is this message a complaint? 'My parcel is late again.'"
            for i in range(n)]  # fmt: skip


def child(args) -> int:
    """One LangChain process: wait for the shared start time, .batch() the prompts, print a JSON line."""
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=args.base_url, api_key=args.api_key, model=args.model, max_tokens=8)
    todo = prompts(args.proc, args.prompts)
    time.sleep(max(0.0, args.start_at - time.time()))
    t0 = time.time()
    out = llm.batch(todo, return_exceptions=True)
    wall = time.time() - t0
    errors: dict[str, int] = {}
    for r in out:
        if isinstance(r, BaseException):
            key = type(r).__name__
            errors[key] = errors.get(key, 0) + 1
    answered = sum(1 for r in out if not isinstance(r, BaseException) and r.content)
    print(json.dumps({"proc": args.proc, "answered": answered, "errors": errors, "wall_s": wall}), flush=True)
    return 0


def sim_config(args) -> dict:
    return {
        "time_scale": 1,
        "seed": 5,
        "providers": {
            "tight": {"model": MODEL, "rpm": args.rpm, "tpm": 10_000_000, "burst_seconds": 1.3,
                      "median_ms": args.median_ms, "sigma": 0.3, "max_concurrency": 64, "completion_tokens": 2},
        },
    }  # fmt: skip


def provider_file(sim_url: str, args) -> dict:
    return {
        "providers": [
            {"name": "tight", "kind": "openai", "base_url": f"{sim_url}/tight/v1", "model": MODEL,
             "rpm": args.rpm, "tpm": 10_000_000, "max_concurrency": 16, "burst_seconds": 1,
             "timeout_seconds": 30, "max_retries": 3, "enabled": True},
        ],
        "routes": [{"route": "chat", "provider": "tight", "priority": 0, "weight": 1}],
    }  # fmt: skip


def one_row(sim, name: str, base_url: str, api_key: str, model: str, args) -> dict:
    sim.reset()
    start_at = time.time() + 3.0  # every child imported LangChain by then
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--_child", "--proc", str(i), "--base-url", base_url, "--api-key", api_key,
             "--model", model, "--prompts", str(args.prompts), "--start-at", str(start_at)],
            stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )
        for i in range(args.processes)
    ]  # fmt: skip
    outs = []
    for p in procs:
        stdout, _ = p.communicate(timeout=900)
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        outs.append(
            json.loads(lines[-1]) if lines else {"answered": 0, "errors": {"crashed": 1}, "wall_s": None}
        )
    c = sim.counters()["providers"]["tight"]
    errors: dict[str, int] = {}
    for o in outs:
        for k, v in o["errors"].items():
            errors[k] = errors.get(k, 0) + v
    row = {
        "row": name, "answered": sum(o["answered"] for o in outs), "asked": args.prompts * args.processes,
        "errors": errors, "wall_s": max((o["wall_s"] or 0) for o in outs),
        "sim_requests": c["requests"], "sim_429": c["rate_limited_429"], "sim_503": c["overload_503"],
        "sim_ok": c["ok"], "per_process": outs,
    }  # fmt: skip
    print(json.dumps({k: v for k, v in row.items() if k != "per_process"}), flush=True)
    return row


def render(rows: list[dict], meta: dict, args) -> str:
    lines = report_header("LangChain × 3 processes on one tight provider: gateway vs direct (issue #22)", meta,
                          SHARED_MACHINE)  # fmt: skip
    lines += [
        f"- each of {args.processes} processes: `ChatOpenAI(base_url=…, api_key=…, model=…, max_tokens=8)"
        f".batch({args.prompts} prompts, return_exceptions=True)`, started together (langchain-openai "
        f"{meta['langchain_openai']}, openai {meta['openai']}); SDK defaults otherwise (2 retries)",
        f"- provider: the simulator, time_scale 1, rpm {args.rpm} ({args.rpm / 60:g}/s, burst 1.3 s), latency "
        f"median {args.median_ms:g} ms; quota floor for {args.prompts * args.processes} calls ≈ "
        f"{(args.prompts * args.processes - args.rpm / 60 * 1.3) / (args.rpm / 60):.0f} s",
        f"- gateway: `{meta['uvicorn']}` (1 process), PostgreSQL + Redis, provider rpm {args.rpm}, burst_seconds 1, "
        "max_concurrency 16; `model` = the route `chat`",
        "",
        "| run | row | answered / asked | errors at the callers | wall (s) | requests at provider | 429s at provider "
        "| 503s at provider |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(r["errors"].items())) or "none"
        lines.append(
            f"| {r['run']} | {r['row']} | {r['answered']} / {r['asked']} | {errs} | {fmt_s(r['wall_s'], 1)} | "
            f"{r['sim_requests']} | {r['sim_429']} | {r['sim_503']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=100, help="prompts per process")
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--median-ms", type=float, default=300)
    ap.add_argument("--runs", type=int, default=1, help="rounds of both rows (alternating order)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--proc", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    ap.add_argument("--api-key", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    add_output_args(ap)
    add_publish_args(ap)
    args = ap.parse_args(argv)
    if args._child:
        return child(args)
    if args.publish:
        meta, saved, run_args = load_published(ap, args.publish)
        publish(render(saved, meta, run_args), args, "interactive-langchain-three")
        return 0
    exit_cleanly_on_sigterm()
    logdir = ROOT / "var" / "bench" / "langchain_three"
    logdir.mkdir(parents=True, exist_ok=True)
    rows = []
    with run_simulator_subprocess(sim_config(args), log_path=logdir / "sim.log") as sim:
        with InteractiveStack(provider_file(sim.base_url, args), logdir) as gw:
            for run in range(1, args.runs + 1):
                order = ["direct", "gateway"] if run % 2 else ["gateway", "direct"]
                for name in order:
                    if name == "direct":
                        row = one_row(sim, name, sim.provider_url("tight"), "sk-sim", MODEL, args)
                    else:
                        row = one_row(sim, name, f"{gw.asgi_url}/v1", gw.key, "chat", args)
                    row["run"] = run
                    rows.append(row)
    from importlib.metadata import version

    meta = run_meta(command_line("bench/langchain_three.py", argv), uvicorn=uvicorn_command(1),
                    langchain_openai=version("langchain-openai"), openai=version("openai"))  # fmt: skip
    text = render(rows, meta, args)
    print(text)
    path = Path(args.json) if args.json else logdir / "langchain_three.json"
    save_and_publish(path, meta, rows, args, args.marker or "interactive-langchain-three", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

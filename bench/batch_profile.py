"""Where a batch item's milliseconds go in a worker (issue #36, "Let profiles decide"): py-spy on every
Celery pool child while one batch runs, summarised per layer by bench/pyspy_top.py.

    .venv/bin/python bench/batch_profile.py --items 10000          # prints the layers, writes nothing
    .venv/bin/python bench/batch_profile.py --items 10000 --write  # and the "batch-profile" section

The deployment users run: REST → one ``celery -A gateway_site worker`` (Celery's default pool and
concurrency) → a ~1 ms simulated provider with unlimited quota (bench/overhead.py's SIM_CFG and provider
file). py-spy (``--pyspy``, default /tmp/pyspy/bin/py-spy: ``python3 -m venv /tmp/pyspy &&
/tmp/pyspy/bin/pip install py-spy``) records each pool child from the submission to the batch's end in
raw (collapsed) form; CPU per item is the children's user + system CPU over the batch / items.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, SHARED_MACHINE, command_line, replace_section, report_header, run_meta  # noqa: E402
from bench.interactive_stack import cpu_seconds  # noqa: E402
from bench.overhead import SIM_CFG, provider_file  # noqa: E402
from bench.stack import GatewayStack, pool_children  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402


def layers(raw_files: list[Path], per_item_ms: float) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pyspy_top.py"), *map(str, raw_files), "--layers",
         "--per-call-ms", f"{per_item_ms:.3f}", "--top", "25"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=64, help="the provider's max_concurrency")
    ap.add_argument("--pyspy", default="/tmp/pyspy/bin/py-spy")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument(
        "--write", action="store_true", help="write the batch-profile section of docs/benchmarks.md"
    )
    ap.add_argument("--note", default=SHARED_MACHINE)
    args = ap.parse_args(argv)
    logdir = ROOT / "var" / "bench" / "batch_profile"
    logdir.mkdir(parents=True, exist_ok=True)
    items = [{"custom_id": f"i{n}", "provider": "fast", "query": f"question {n}", "params": {"max_tokens": 4}}
             for n in range(args.items)]  # fmt: skip
    with run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
        with GatewayStack("shared", provider_file(sim.base_url, args.concurrency), logdir, workers=1) as gw:
            children = [pid for proc in gw.worker_procs for pid in pool_children(proc.pid)]
            raws = [logdir / f"pyspy-{pid}.txt" for pid in children]
            spies = [
                subprocess.Popen([args.pyspy, "record", "--format", "raw", "--nonblocking", "-r", str(args.rate), "-p",
                                  str(pid), "-o", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for pid, raw in zip(children, raws, strict=True)
            ]  # fmt: skip
            time.sleep(1.0)
            c0 = cpu_seconds(children)
            batch, wall = gw.run_batch(items)
            cpu = cpu_seconds(children) - c0
            for spy in spies:
                spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
            for spy in spies:
                spy.wait(60)
    per_item_ms = 1000 * cpu / args.items
    summary = (
        f"{args.items} items in {wall:.1f} s ({args.items / wall:.0f} items/s), status {batch['status']}; "
        f"pool children {len(children)}, {per_item_ms:.2f} ms of their CPU per item."
    )
    print(summary)
    table = layers([r for r in raws if r.exists()], per_item_ms)
    print(table)
    if args.write:
        meta = run_meta(command_line("bench/batch_profile.py", argv))
        lines = report_header(
            "Where a batch item's CPU goes in a worker (py-spy, issue #36)", meta, args.note
        )
        lines += ["", summary, "", "```", table.rstrip(), "```"]
        replace_section(ROOT / "docs" / "benchmarks.md", "batch-profile", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

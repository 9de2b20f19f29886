"""The batch path against a bare client loop, in one run: before/after commits interleaved.

    .venv/bin/python bench/batch_path.py --base 08d80db --rounds 2 --items 10000

Per round, in this order: a bare aiohttp loop (``--bare-concurrency`` requests in flight) against the
simulator; then, for each tree (``--base`` commit in a scratch worktree, and this tree; their order
alternates between rounds), ``bench/overhead.py --parts throughput --modes shared`` of that tree: REST →
``celery -A gateway_site worker`` (default pool, ``--workers`` workers) → the same ~1 ms simulated
provider with unlimited quota (each overhead.py run starts its own simulator of the same configuration;
the bare loop runs against this script's). The gateway's result is items/s over the batch's wall time,
and its ratio to the bare loop of the same round.

``--redis-monitor``: one more run per tree with ``redis-cli MONITOR`` beside it, counting what the
gateway's clients sent (Celery included; a command run by a Lua script is not counted, its EVALSHA is)
per item — a separate run, because MONITOR slows Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, add_output_args, command_line, git_rev, replace_section, run_meta  # noqa: E402
from bench.overhead import SIM_CFG  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

PY = sys.executable
CPU_COLUMNS = ("celery workers", "postgres", "redis", "not attributed")  # bench/overhead.py CPU_GROUPS labels
BODY = {"model": "fast-1ms", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}


def bare_loop(sim_url: str, n: int, concurrency: int) -> float:
    """Requests/s of a bare aiohttp loop: ``concurrency`` workers posting until ``n`` are answered."""
    import aiohttp

    url = f"{sim_url}/fast/v1/chat/completions"

    async def run() -> float:
        left = n
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async with session.post(url, json=BODY) as r:
                        await r.json()
                        assert r.status == 200

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return n / (time.perf_counter() - t0)

    return asyncio.run(run())


def worktree(commit: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="bench-base-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True,
                   capture_output=True)  # fmt: skip
    return path


def gateway_run(tree: Path, args, monitor: bool = False) -> dict:
    """One overhead.py throughput run of ``tree`` (it starts its own simulator, configured as this one)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [PY, str(tree / "bench" / "overhead.py"), "--parts", "throughput", "--modes", "shared",
           "--items", str(args.items), "--workers", str(args.workers), "--no-write"]  # fmt: skip
    counter, log = None, ROOT / "var" / "bench" / "batch_path_monitor.log"
    if monitor:  # into a file: a pipe nobody reads fills, and Redis drops the monitor client
        with open(log, "w") as sink:
            counter = subprocess.Popen(["redis-cli", "MONITOR"], stdout=sink)
        time.sleep(0.5)
    try:
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=3600)
    finally:
        counts: Counter = Counter()
        if counter is not None:
            counter.terminate()
            counter.wait(10)
            with open(log, errors="replace") as lines:
                for line in lines:
                    parts = line.split('"')
                    if len(parts) > 1 and " lua]" not in parts[0]:
                        counts[parts[1].upper()] += 1
    rows = [
        json.loads(line.split(" ", 1)[1])
        for line in out.stdout.splitlines()
        if line.startswith("throughput ")
    ]
    if out.returncode != 0 or not rows:
        raise RuntimeError(f"{tree}: overhead.py failed: {out.stdout[-2000:]} {out.stderr[-2000:]}")
    row = rows[0]
    if monitor:
        row["redis_commands"] = dict(counts.most_common())
        row["redis_per_item"] = sum(counts.values()) / args.items
    return row


def render(rows: list[dict], meta: dict) -> str:
    lines = [
        "## Batch path against a bare client loop (bench/batch_path.py)",
        "",
        f"Run {meta['date']} on {meta['machine']}, commit {meta['commit']} (this tree) against "
        f"{meta['base']} (base), `{meta['command']}`. {meta['note']}",
        "",
        "| round | tree | items/s | bare loop req/s | × bare loop | CPU-s: workers / postgres / redis / exited (PostgreSQL backends) / machine busy | Redis cmds / item |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        groups = (r.get("cpu") or {}).get("groups") or {}
        cpu_s = " / ".join(f"{groups.get(k, 0.0):.1f}" for k in CPU_COLUMNS)
        cpu_s += f" / {(r.get('cpu') or {}).get('busy_s', 0.0):.1f}"
        per_item = r.get("redis_per_item")
        bare, ratio = ("—", "—") if "bare_rps" not in r else (f"{r['bare_rps']:.0f}", f"{r['ratio']:.3f}")
        lines.append(
            f"| {r['round']} | {r['tree']} | {r['items_per_s']:.0f} | {bare} | {ratio} | {cpu_s} | "
            f"{'' if per_item is None else f'{per_item:.1f}'} |"
        )
    for r in rows:
        if r.get("redis_commands"):
            top = ", ".join(f"{k} {v / meta['items']:.2f}" for k, v in list(r["redis_commands"].items())[:6])
            lines.append(f"\nRedis commands per item under MONITOR, {r['tree']}: {top}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit to compare against")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--bare-requests", type=int, default=20000)
    ap.add_argument("--bare-concurrency", type=int, default=32)
    ap.add_argument("--redis-monitor", action="store_true")
    ap.add_argument("--note", default="", help="what else ran on the machine")
    ap.add_argument("--render-only", action="store_true", help="rewrite the docs section from the last run")
    add_output_args(ap)
    args = ap.parse_args(argv)
    out = ROOT / "var" / "bench" / "batch_path.json"
    if args.render_only:
        saved = json.loads(out.read_text())
        saved["meta"].setdefault("items", args.items)
        replace_section(Path(args.out), "batch-path", render(saved["rows"], saved["meta"]))
        return 0
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    base = worktree(args.base)
    trees = {"base": base, "this": ROOT}
    rows: list[dict] = []
    try:
        with run_simulator_subprocess(SIM_CFG, log_path=ROOT / "var" / "bench" / "batch_path_sim.log") as sim:
            for rnd in range(1, args.rounds + 1):
                bare = bare_loop(sim.base_url, args.bare_requests, args.bare_concurrency)
                print(f"round {rnd}: bare loop {bare:.0f} req/s", flush=True)
                order = ["base", "this"] if rnd % 2 else ["this", "base"]
                for name in order:
                    row = gateway_run(trees[name], args)
                    row.update(round=rnd, tree=name, bare_rps=bare, ratio=row["items_per_s"] / bare)
                    rows.append(row)
                    print(f"round {rnd}: {name} {row['items_per_s']:.0f} items/s ({row['ratio']:.3f} × bare)",
                          flush=True)  # fmt: skip
            if args.redis_monitor:
                for name in ("base", "this"):
                    row = gateway_run(trees[name], args, monitor=True)
                    row.update(round="MONITOR", tree=name)
                    rows.append(row)
                    print(f"MONITOR {name}: {row['redis_per_item']:.1f} commands/item "
                          f"{list(row['redis_commands'].items())[:12]}", flush=True)  # fmt: skip
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True
        )
    meta = run_meta(
        command_line("bench/batch_path.py", argv), base=args.base, note=args.note, items=args.items
    )
    meta.setdefault("commit", git_rev())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = render(rows, meta)
    print(text)
    if not args.no_write:
        replace_section(Path(args.out), "batch-path", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

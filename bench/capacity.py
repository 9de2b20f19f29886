"""Inputs of the capacity model (issue "Several hosts", docs/operations.md "Capacity model"): what one
batch item costs each shared part, measured on a PostgreSQL and a Redis of this run's own (so nothing
else on the machine is in their counters).

    .venv/bin/python bench/capacity.py --items 10000            # prints, writes the "capacity" section
    .venv/bin/python bench/capacity.py --items 2000 --no-write

The deployment users run: REST (gunicorn) → ``--workers`` × ``celery -A gateway_site worker`` (Celery's
default pool and concurrency) → a ~1 ms simulated provider with unlimited quota (bench/overhead.py's
SIM_CFG). Around the batch (from the POST to its terminal status): the worker processes' CPU (from
/proc), Redis's own CPU and commands (``INFO cpu`` / ``INFO commandstats``: every command, those a Lua
script runs included, and the EVALSHA calls themselves), PostgreSQL's WAL bytes
(``pg_current_wal_lsn``), transactions and rows (``pg_stat_database``) and its server processes' CPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402
import redis  # noqa: E402

from bench.common import (
    ROOT,
    SHARED_MACHINE,
    add_output_args,
    command_line,
    free_port,
    replace_section,
    report_header,
    run_meta,
)  # noqa: E402
from bench.interactive_stack import cpu_seconds  # noqa: E402
from bench.overhead import SIM_CFG, provider_file  # noqa: E402
from bench.stack import GatewayStack, pool_children  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402

PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), None)


class PrivatePostgres:
    """initdb + postgres on a free port in a temp dir (as the postgres user when run as root)."""

    def __enter__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="gwcap-pg-"))
        self.port = free_port()
        user = ["runuser", "-u", "postgres", "--"] if shutil.which("runuser") and _root() else []
        if user:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run([*user, str(PG_BIN / "initdb"), "-D", str(self.dir / "d"), "-U", "postgres", "--auth=trust"],
                       check=True, capture_output=True)  # fmt: skip
        self.proc = subprocess.Popen(
            [*user, str(PG_BIN / "postgres"), "-D", str(self.dir / "d"), "-p", str(self.port), "-c",
             "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}", "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while subprocess.run(
            [str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"]
        ).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError("private postgres did not start")
            time.sleep(0.2)
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/gateway_capacity"
        return self

    def cpu_s(self) -> float:
        """The server's CPU so far: the postmaster's own and its exited children's (cutime, cstime), and
        every live child's (backends, walwriter, checkpointer, …)."""
        import os

        tick = os.sysconf("SC_CLK_TCK")
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        own = sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
        return own + cpu_seconds(_descendants(self.proc.pid))

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def _root() -> bool:
    import os

    return os.geteuid() == 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = pool_children(todo.pop())
        out += kids
        todo += kids
    return out


def redis_counters(client: redis.Redis) -> dict:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    return {
        "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        "commands": sum(int(v["calls"]) for v in stats.values()),
        "evalsha": int(stats.get("cmdstat_evalsha", {}).get("calls", 0)),
    }


def pg_counters(url: str) -> dict:
    with psycopg.connect(url, autocommit=True) as conn:
        wal = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]
        xact, ins, upd = conn.execute(
            "SELECT xact_commit + xact_rollback, tup_inserted, tup_updated FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
    return {"wal_bytes": int(wal), "transactions": int(xact), "inserted": int(ins), "updated": int(upd)}


def measure(args) -> dict:
    logdir = ROOT / "var" / "bench" / "capacity"
    logdir.mkdir(parents=True, exist_ok=True)
    items = [{"custom_id": f"i{n}", "provider": "fast", "query": f"question {n}", "params": {"max_tokens": 4}}
             for n in range(args.items)]  # fmt: skip
    rport = free_port()
    rproc = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        with PrivatePostgres() as pg, run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
            stack = GatewayStack("shared", provider_file(sim.base_url, args.concurrency), logdir, workers=args.workers,
                                 database_url=pg.url, redis_url=f"redis://127.0.0.1:{rport}/0")  # fmt: skip
            with stack as gw:
                rc = redis.Redis(port=rport)
                time.sleep(2.0)  # idle traffic (heartbeats, dispatcher polls) settles
                workers = [p for proc in gw.worker_procs for p in [proc.pid, *pool_children(proc.pid)]]
                r0, p0 = redis_counters(rc), pg_counters(pg.url)
                c0, pgc0 = cpu_seconds(workers), pg.cpu_s()
                batch, wall = gw.run_batch(items)
                r1, p1 = redis_counters(rc), pg_counters(pg.url)
                c1, pgc1 = cpu_seconds(workers), pg.cpu_s()
                children = sum(len(pool_children(proc.pid)) for proc in gw.worker_procs)
    finally:
        rproc.terminate()
        rproc.wait(10)
    n = args.items
    return {
        "items": n, "status": batch["status"], "wall_s": wall, "items_per_s": n / wall, "workers": args.workers,
        "children": children, "worker_cpu_ms_per_item": 1000 * (c1 - c0) / n,
        "redis_cpu_ms_per_1000": 1_000_000 * (r1["cpu_s"] - r0["cpu_s"]) / n,
        "redis_commands_per_item": (r1["commands"] - r0["commands"]) / n,
        "redis_evalsha_per_item": (r1["evalsha"] - r0["evalsha"]) / n,
        "pg_cpu_ms_per_item": 1000 * (pgc1 - pgc0) / n,
        "wal_bytes_per_item": (p1["wal_bytes"] - p0["wal_bytes"]) / n,
        "pg_transactions_per_item": (p1["transactions"] - p0["transactions"]) / n,
        "pg_rows_written_per_item": (p1["inserted"] + p1["updated"] - p0["inserted"] - p0["updated"]) / n,
    }  # fmt: skip


def render(row: dict, meta: dict) -> str:
    lines = report_header(
        "Capacity model inputs: what one batch item costs each shared part", meta, meta["note"]
    )
    lines += [
        "",
        f"{row['items']} items, {row['workers']} workers ({row['children']} pool children), status "
        f"{row['status']}: {row['wall_s']:.1f} s, **{row['items_per_s']:.0f} items/s**.",
        "",
        "| per item | measured |",
        "|---|---|",
        f"| worker CPU (all worker processes) | {row['worker_cpu_ms_per_item']:.2f} ms |",
        f"| Redis CPU | {row['redis_cpu_ms_per_1000'] / 1000:.3f} ms ({row['redis_cpu_ms_per_1000']:.0f} ms per 1,000 items) |",
        f"| Redis commands (every command, those run by Lua scripts included) | {row['redis_commands_per_item']:.1f} |",
        f"| of them EVALSHA (script calls: round trips) | {row['redis_evalsha_per_item']:.1f} |",
        f"| PostgreSQL server CPU | {row['pg_cpu_ms_per_item']:.3f} ms |",
        f"| PostgreSQL WAL | {row['wal_bytes_per_item']:.0f} bytes |",
        f"| PostgreSQL transactions | {row['pg_transactions_per_item']:.3f} |",
        f"| PostgreSQL rows inserted + updated | {row['pg_rows_written_per_item']:.2f} |",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=64, help="the provider's max_concurrency")
    ap.add_argument("--note", default=SHARED_MACHINE)
    add_output_args(ap)
    args = ap.parse_args(argv)
    if PG_BIN is None:
        raise SystemExit("PostgreSQL's server binaries (/usr/lib/postgresql/*/bin) are needed")
    row = measure(args)
    meta = run_meta(command_line("bench/capacity.py", argv), note=args.note)
    text = render(row, meta)
    print(text)
    (ROOT / "var" / "bench" / "capacity.json").write_text(json.dumps({"meta": meta, "row": row}, indent=1))
    if not args.no_write:
        replace_section(Path(args.out), "capacity", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

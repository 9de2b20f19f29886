"""`manage.py submit_batch FILE --team NAME` with and without `--wait`, in both modes, as real commands
(issue #28).

Single-process mode (SQLite, no REDIS_URL): the batch runs on a thread of the command's own process.
Before the fix, without `--wait` the command printed the queued batch and exited 0 while its thread
was still sending: at interpreter shutdown every item ended `gateway_error` "RuntimeError: cannot
schedule new futures after interpreter shutdown" and the batch `failed`. Now the command waits (and
says so), and a `--timeout` cancels the unsent items instead of leaving them to fail.

Worker mode (this run's PostgreSQL and Redis): without `--wait` the command prints the queued batch
and exits 0 at once; with `--wait` a real worker runs it and the command returns when it completed.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from batches.models import Batch, BatchStatus
from sim.testing import run_simulator_in_thread
from tests.waiting import wait_until
from tests.workers import ROOT, delete_queue, start_worker, stop_worker, subprocess_env, test_queue

pytestmark = pytest.mark.timeout(180)

RUNS_HERE = "single-process mode (REDIS_URL is unset) runs the batch inside this command"
SIM = {
    "time_scale": 1,
    "seed": 28,
    # ~0.2 s per call, 2 at a time: 8 items take about a second, long enough for a thread to be cut off
    "providers": {
        "sp": {"rpm": 100_000, "tpm": 10**8, "median_ms": 200, "sigma": 0.05, "max_concurrency": 50}
    },
}


def items(n: int, prefix: str = "i") -> str:
    return "".join(
        json.dumps({"custom_id": f"{prefix}{i}", "provider": "sp", "query": f"hello {i}"}) + "\n"
        for i in range(n)
    )


def single_process_env(db: Path, **extra: str) -> dict[str, str]:
    """A user's shell in single-process mode: SQLite, no REDIS_URL, none of this run's test settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "REDIS_URL", "DATABASE_URL", "CELERY_", "GATEWAY_", "PROMETHEUS_"))
    }
    env.update(DATABASE_URL=f"sqlite:///{db}", DJANGO_LOG_LEVEL="WARNING", **extra)
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def on_terminal(env: dict[str, str], *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """`python manage.py ARGS` with stderr on a pseudo-terminal (stdout piped): (exit code, what the
    terminal showed, stdout)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    shown = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's side is closed
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=timeout)
    reader.join(10)
    os.close(master)
    return proc.returncode, shown.decode(errors="replace"), out.decode()


def item_rows(db: Path, batch_id: str) -> list[tuple[str, str]]:
    """(status, error type) of every item of the batch, read from the SQLite file."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT status, error_type FROM batches_batchitem WHERE batch_id = ? ORDER BY seq",
            (batch_id.replace("-", ""),),
        ).fetchall()


@pytest.fixture(scope="module")
def single(tmp_path_factory, migrated_sqlite):
    """A migrated SQLite database with provider `sp` (the simulator) and team `acme`, as a user sets it up."""
    tmp = tmp_path_factory.mktemp("single-process")
    db = migrated_sqlite(tmp / "gateway.sqlite3")  # `manage.py migrate`d (conftest.py)
    env = single_process_env(db)
    with run_simulator_in_thread(SIM) as sim:
        providers = tmp / "providers.json"
        providers.write_text(
            json.dumps(
                {
                    "providers": [
                        {"name": "sp", "base_url": sim.provider_url("sp"), "model": "m", "rpm": 60_000,
                         "tpm": 10**8, "max_concurrency": 2, "burst_seconds": 1, "max_retries": 0},
                    ]
                }
            )
        )  # fmt: skip
        for args in (["load_providers", str(providers)], ["create_team", "acme"]):
            done = manage(env, *args)
            assert done.returncode == 0, done.stdout + done.stderr
        yield {"db": db, "env": env, "tmp": tmp}


def test_single_process_without_wait_runs_the_batch_to_the_end_and_says_so(single):
    """Before the fix: exit 0 with the batch `queued` on stdout, then all items `gateway_error`."""
    path = single["tmp"] / "eight.jsonl"
    path.write_text(items(8))
    done = manage(single["env"], "submit_batch", str(path), "--team", "acme")
    assert done.returncode == 0, done.stderr
    assert RUNS_HERE in done.stderr
    assert "Traceback" not in done.stderr and "cannot schedule new futures" not in done.stderr
    batch = json.loads(done.stdout)
    assert batch["status"] == "completed", batch
    assert (batch["request_counts"]["total"], batch["request_counts"]["completed"]) == (8, 8)
    assert [s for s, _ in item_rows(single["db"], batch["id"])] == ["succeeded"] * 8


def test_single_process_with_wait_completes_without_the_note(single):
    path = single["tmp"] / "four.jsonl"
    path.write_text(items(4))
    done = manage(single["env"], "submit_batch", str(path), "--team", "acme", "--wait")
    assert done.returncode == 0, done.stderr
    assert RUNS_HERE not in done.stderr  # --wait asked for exactly this
    assert json.loads(done.stdout)["status"] == "completed"


def test_single_process_timeout_cancels_the_unsent_items_instead_of_failing_them(single):
    """Stopping early cannot leave the batch running (its thread ends with the command): the unsent
    items end `cancelled`, the ones in flight answer, none ends `gateway_error`; exit 1, one sentence."""
    path = single["tmp"] / "forty.jsonl"
    path.write_text(items(40))  # 2 at a time, 0.2 s each: ~4 s of work
    done = manage(single["env"], "submit_batch", str(path), "--team", "acme", "--timeout", "0.5")
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("CommandError: ")]
    assert len(errors) == 1 and "--timeout" in errors[0] and "cancelled" in errors[0], done.stderr
    batch = json.loads(done.stdout)
    assert batch["status"] == "cancelled", batch
    counts = batch["request_counts"]  # printed once every call in flight had answered
    assert counts["completed"] + counts["failed"] + counts["cancelled"] == counts["total"] == 40, counts
    assert counts["completed"] >= 1 and counts["cancelled"] >= 1, counts
    rows = item_rows(single["db"], batch["id"])
    assert {s for s, _ in rows} <= {"succeeded", "cancelled"}, rows
    assert "cancelled" in {s for s, _ in rows}
    assert not [e for _, e in rows if e == "gateway_error"]


def test_single_process_on_a_terminal_shows_readable_logs_and_no_json(single):
    """Before the fix: JSON log lines (the batch report as JSON inside a JSON string) in the progress."""
    path = single["tmp"] / "three.jsonl"
    path.write_text(items(3))
    env = {**single["env"], "DJANGO_LOG_LEVEL": "INFO"}  # the batch_started / batch_finished events
    code, shown, out = on_terminal(env, "submit_batch", str(path), "--team", "acme", "--wait")
    assert code == 0, shown
    assert json.loads(out)["status"] == "completed"
    assert "batches.lifecycle batch started" in shown, shown
    assert "batches.batchlog batch finished" in shown and "status=completed" in shown, shown
    assert '{"time"' not in shown and '\\"batch_id\\"' not in shown, shown


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_worker_mode_queues_without_wait_and_waits_for_a_real_worker_with_it(tmp_path, make_provider, team):
    """With REDIS_URL: without --wait the id is printed and the batch stays queued for the workers
    (exit 0 at once); with --wait the command follows a real worker until the batch completed."""
    queue = test_queue("submit")
    env = subprocess_env(CELERY_TASK_ALWAYS_EAGER="0", CELERY_TASK_DEFAULT_QUEUE=queue)
    worker = None
    try:
        with run_simulator_in_thread(SIM) as sim:
            make_provider("sp", base_url=sim.provider_url("sp"), rpm=60_000, max_concurrency=2, max_retries=0)
            path = tmp_path / "four.jsonl"
            path.write_text(items(4))

            queued = manage(env, "submit_batch", str(path), "--team", team.name)
            assert queued.returncode == 0, queued.stderr
            assert RUNS_HERE not in queued.stderr
            first = json.loads(queued.stdout)
            assert first["status"] == "queued"
            assert Batch.objects.get(id=first["id"]).status == BatchStatus.QUEUED  # no worker yet

            worker = start_worker("submit", queue, tmp_path / "worker.log")
            waited = manage(env, "submit_batch", str(path), "--team", team.name, "--wait", "--timeout", "90")
            log = (tmp_path / "worker.log").read_text(errors="replace")
            assert waited.returncode == 0, waited.stderr + log
            assert json.loads(waited.stdout)["status"] == "completed"
            # the first batch, queued before any worker ran, is served too
            wait_until(
                lambda: Batch.objects.get(id=first["id"]).status == BatchStatus.COMPLETED,
                60,
                what="the batch queued without --wait to complete",
                on_fail=lambda: (tmp_path / "worker.log").read_text(errors="replace"),
            )
    finally:
        if worker is not None:
            stop_worker(worker)
        delete_queue(queue)

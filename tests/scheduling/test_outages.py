"""Redis and PostgreSQL restarts mid-batch, on servers this test starts itself (never the shared ones):
a real `celery -A gateway_site worker` rides the outage through inside its running dispatcher slice,
provider traffic resumes long before a claim lease could expire, and every item ends exactly once."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import redis
from celery import Celery

from batches.models import Batch, BatchItem, ItemStatus
from tests.engine.provider_server import ok_reply
from tests.exactly_once import assert_exactly_once

from .conftest import ROOT, q, queue_batch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PG_BIN = Path("/usr/lib/postgresql/15/bin")
ITEMS = 150
LEASE = 60  # the default claim lease: resumption must not wait for it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, tmp: Path):
        self.port, self.dir, self.proc = free_port(), tmp, None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        cmd = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(self.dir),
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _pings(client), 10, "redis-server to start")
        client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _pings(client) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def send_start(broker_url: str, queue: str, batch_id) -> None:
    app = Celery(broker=broker_url, set_as_current=False)  # never the current app: shared tasks stay ours
    app.send_task("batches.start_batch", args=[str(batch_id)], queue=queue)
    app.close()


def exactly_once(provider_server, provider: str, statuses: Counter, hits_by_item: Counter) -> None:
    assert statuses == {ItemStatus.SUCCEEDED: ITEMS}
    assert set(hits_by_item) == {f"o{i:03d}" for i in range(ITEMS)}


def report_resume(service: str, seconds: float) -> None:
    """Seconds from the service answering again to the first provider request after it (bench row input:
    ``OUTAGE_RESULTS=path pytest tests/scheduling/test_outages.py -s`` appends one line per run)."""
    print(f"\n{service} back → provider traffic resumed after {seconds:.2f} s")
    path = os.environ.get("OUTAGE_RESULTS")
    if path:
        with open(path, "a") as out:
            out.write(f"{service} {seconds:.3f}\n")


@pytest.mark.timeout(240)
def test_redis_restart_mid_batch(provider_server, make_provider, team, workers, tmp_path):
    provider_server.behaviours["rdp"] = lambda n, r, a, b: ok_reply(0.01)
    make_provider("rdp", base_url=provider_server.url("rdp"), rpm=600, burst_seconds=1, max_concurrency=4)
    server = RedisServer(tmp_path)
    server.start()
    w = None
    try:
        w = workers(
            REDIS_URL=server.url,
            CELERY_BROKER_URL=server.url,
            GATEWAY_DISPATCHERS=1,
            GATEWAY_DISPATCH_SLICE_SECONDS=120,  # the outage happens inside one running slice
            GATEWAY_CLAIM_LEASE_SECONDS=LEASE,
        )
        w.start("w1")
        batch = queue_batch(team, [q(f"o{i:03d}", "rdp") for i in range(ITEMS)])
        send_start(server.url, w.queue, batch.id)
        wait_for(lambda: provider_server.count("rdp") >= 30, 60, "the batch to start", w.logs)
        server.stop()
        at_stop = provider_server.count("rdp")
        time.sleep(3)  # the outage
        # paused: at most the calls holding one of the provider's 4 leases when Redis went away. (This was
        # a print for a while: 2 of ~10 full-suite runs saw ~30 calls here. Not the workers: a reconciler
        # thread leaked into the pytest process by a single-process-mode test had started a dispatcher
        # there, on the shared Redis; tests/conftest.py now stops such threads after every test.)
        during = provider_server.count("rdp") - at_stop
        print(f"\nredis outage: {during} provider requests during the 3 s outage (at most 4 in flight)")
        assert during <= 4, f"{during} provider requests while Redis was down\n{w.logs()}"
        server.start()
        back, at_back = time.monotonic(), provider_server.count("rdp")
        # traffic resumes well inside one claim lease (nothing waited for claims to expire)
        wait_for(lambda: provider_server.count("rdp") > at_back, LEASE / 2, "traffic to resume", w.logs)
        report_resume("redis", time.monotonic() - back)
        wait_for(lambda: provider_server.count("rdp") >= at_stop + 20, LEASE / 2, "traffic to resume", w.logs)
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(),
            90,
            "the batch",
            w.logs,
        )
    finally:
        if w is not None:
            w.stop()
        server.stop()
    statuses = Counter(BatchItem.objects.filter(batch=batch).values_list("status", flat=True))
    per_item = Counter(h.request_id for h in provider_server.hits if h.provider == "rdp")
    exactly_once(provider_server, "rdp", statuses, per_item)
    duplicates = sum(n - 1 for n in per_item.values())
    print(f"\nredis restart: {duplicates} duplicate provider calls")
    assert duplicates <= 4  # at most the calls in flight when Redis went away
    assert_exactly_once([batch], [provider_server])  # ... and each one is in attempts and request_count
    log = (tmp_path / "w1.log").read_text(errors="replace")
    assert "quota store unavailable" in log or "execution paused" in log  # loud, not silent


class PostgresServer:
    """A throwaway cluster (initdb + pg_ctl as the postgres user) on a free port."""

    def __init__(self, tmp: Path):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="sched-pg-"))
        self.data = self.dir / "data"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/gateway"

    def _as_postgres(self, *cmd: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        # a throwaway cluster: --no-sync skips the fsync of its files at the end of initdb
        initdb = [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust"]
        self._as_postgres(*initdb, "-E", "UTF8", "--no-sync")
        self.start()
        with psycopg.connect(f"postgres://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE gateway")

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


SETUP = """
from teams.models import Team
from batches.submission import submit_batch
from providers.models import Provider
import json, os
Provider.objects.create(name="pgp", base_url=os.environ["PROVIDER_URL"], model="m", rpm=600, tpm=10**7,
                        max_concurrency=4, burst_seconds=1, timeout_seconds=10)
team = Team.objects.create(name="acme")
items = [{"custom_id": f"o{i:03d}", "provider": "pgp", "query": "q", "params": {"max_tokens": 8}} for i in range(N)]
print(json.dumps({"batch": str(submit_batch(team=team, items=items).id)}))
"""


@pytest.mark.timeout(300)
@pytest.mark.skipif(not (PG_BIN / "initdb").exists(), reason="PostgreSQL 15 server binaries not installed")
def test_postgres_restart_mid_batch(provider_server, workers, tmp_path, settings):
    provider_server.behaviours["pgp"] = lambda n, r, a, b: ok_reply(0.01)
    pg = PostgresServer(tmp_path)
    pg.init()
    w = None
    try:
        w = workers(
            DATABASE_URL=pg.url,
            GATEWAY_DISPATCHERS=1,
            GATEWAY_DISPATCH_SLICE_SECONDS=120,  # the outage happens inside one running slice
            GATEWAY_CLAIM_LEASE_SECONDS=LEASE,
        )
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="gateway_site.settings.test", DATABASE_URL=pg.url)
        env.update(
            REDIS_URL=settings.REDIS_URL,
            GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
            CELERY_TASK_ALWAYS_EAGER="0",
            CELERY_TASK_DEFAULT_QUEUE=w.queue,
            PROVIDER_URL=provider_server.url("pgp"),
        )
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        w.start("w1")
        out = subprocess.run(
            [*manage, "shell", "-c", SETUP.replace("N)", f"{ITEMS})")],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        batch_id = json.loads(out.stdout.strip().splitlines()[-1])["batch"]
        wait_for(lambda: provider_server.count("pgp") >= 30, 60, "the batch to start", w.logs)
        pg.stop()
        at_stop = provider_server.count("pgp")
        time.sleep(3)  # the outage
        # paused: the engine cannot store results, so at most the in-flight cap's worth went out
        assert provider_server.count("pgp") <= at_stop + 64
        pg.start()
        back, at_back = time.monotonic(), provider_server.count("pgp")
        wait_for(lambda: provider_server.count("pgp") > at_back, LEASE / 2, "traffic to resume", w.logs)
        report_resume("postgresql", time.monotonic() - back)
        wait_for(lambda: provider_server.count("pgp") >= at_stop + 20, LEASE / 2, "traffic to resume", w.logs)

        def finished() -> bool:
            try:
                with psycopg.connect(pg.url) as conn:
                    row = conn.execute(
                        "SELECT completed_at FROM batches_batch WHERE id = %s", [batch_id]
                    ).fetchone()
                    return row[0] is not None
            except psycopg.OperationalError:
                return False

        wait_for(finished, 90, "the batch", w.logs)
        with psycopg.connect(pg.url) as conn:
            statuses = Counter(
                dict(
                    conn.execute(
                        "SELECT status, count(*) FROM batches_batchitem WHERE batch_id = %s GROUP BY status",
                        [batch_id],
                    ).fetchall()
                )
            )
            status, stats = conn.execute(
                "SELECT status, stats FROM batches_batch WHERE id = %s", [batch_id]
            ).fetchone()
            attempts = dict(
                conn.execute(
                    "SELECT custom_id, attempts FROM batches_batchitem WHERE batch_id = %s", [batch_id]
                ).fetchall()
            )
    finally:
        if w is not None:
            w.stop()
        pg.destroy()
    per_item = Counter(h.request_id for h in provider_server.hits if h.provider == "pgp")
    assert status == "completed"
    exactly_once(provider_server, "pgp", statuses, per_item)
    duplicates = sum(n - 1 for n in per_item.values())
    print(f"\npostgres restart: {duplicates} duplicate provider calls")
    assert duplicates == 0  # results waiting for the database were stored once it was back
    # exactly once, on this test's own PostgreSQL (tests.exactly_once reads the test database)
    assert attempts == dict(per_item)
    assert stats["providers"]["pgp"]["request_count"] == sum(per_item.values())
    log = (tmp_path / "w1.log").read_text(errors="replace")
    assert "execution paused" in log  # loud, not silent

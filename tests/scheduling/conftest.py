"""Fixtures for scheduling tests: the simulator, a real local provider server, Celery workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from celery.exceptions import AlwaysEagerIgnored
from django.conf import settings
from django.db import connection

from sim.testing import sim_server  # noqa: F401 - fixture re-export
from tests.engine.conftest import provider_server  # noqa: F401 - fixture re-export
from tests.workers import test_queue

ROOT = Path(__file__).resolve().parents[2]


def q(cid: str, provider: str, tag: str = "", max_tokens: int = 8) -> dict:
    """A contract ITEM; the simulator's trace picks ``tag`` out of the message (``<tag>:...``)."""
    return {
        "custom_id": cid,
        "provider": provider,
        "query": f"{tag or 'x'}:{cid}",
        "params": {"max_tokens": max_tokens},
    }


def queue_batch(team, items, *, priority: str = "normal", window=None):
    """Store a batch through the submission service without starting it (its on_commit enqueue is
    swallowed); items get their queue_provider exactly as a POST would."""
    from batches import submission

    saved = submission.enqueue_start
    submission.enqueue_start = lambda batch_id: None
    try:
        return submission.submit_batch(
            team=team, items=items, options=submission.BatchOptions(priority=priority, window=window)
        )
    finally:
        submission.enqueue_start = saved


class Workers:
    """Real ``celery -A gateway_site worker`` processes on a queue of their own."""

    def __init__(self, tmp_path: Path, **env):
        self.queue = test_queue("sched")  # inside the run's prefix: the session clean-up finds it
        self.tmp_path = tmp_path
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopped = False

    def start(self, name: str, *pool: str) -> subprocess.Popen:
        env = dict(os.environ)
        db = connection.settings_dict
        env.update(
            DJANGO_SETTINGS_MODULE="gateway_site.settings.test",
            DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}",
            REDIS_URL=settings.REDIS_URL,
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
            CELERY_TASK_ALWAYS_EAGER="0",
            CELERY_TASK_DEFAULT_QUEUE=self.queue,
            DJANGO_LOG_LEVEL="WARNING",
        )
        env.update({k: str(v) for k, v in self.env.items()})
        cmd = [sys.executable, "-m", "celery", "-A", "gateway_site", "worker", *(pool or ("-P", "solo"))]
        cmd += ["-Q", self.queue, "-n", f"{name}@%h", "--without-gossip", "--without-mingle"]
        cmd += ["--without-heartbeat", "-l", "WARNING"]
        log = open(self.tmp_path / f"{name}.log", "wb")
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def start_batch(self, batch_id) -> None:
        from gateway_site import celery_app

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AlwaysEagerIgnored)
            celery_app.send_task("batches.start_batch", args=[str(batch_id)], queue=self.queue)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.tmp_path.glob("*.log")
        )

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        import redis

        client = redis.Redis.from_url(self.env.get("CELERY_BROKER_URL", settings.CELERY_BROKER_URL))
        try:
            client.delete(self.queue, f"_kombu.binding.{self.queue}")
        except redis.RedisError:
            pass
        client.close()


@pytest.fixture
def workers(tmp_path):
    made: list[Workers] = []

    def make(**env) -> Workers:
        w = Workers(tmp_path, **env)
        made.append(w)
        return w

    yield make
    for w in made:
        w.stop()


def wait_for(predicate, timeout: float, what: str, on_fail=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{on_fail()}")

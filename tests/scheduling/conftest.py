"""Fixtures for scheduling tests: the simulator, a real local provider server, Celery workers."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import warnings
from pathlib import Path

import pytest
from celery.exceptions import AlwaysEagerIgnored
from django.conf import settings

from sim.testing import sim_server  # noqa: F401 - fixture re-export
from tests.engine.conftest import provider_server  # noqa: F401 - fixture re-export
from tests.workers import DEFAULT_POOL, start_worker, test_queue

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

    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = lambda batch_id: None
    try:
        return submission.submit_batch(
            team=team, items=items, options=submission.BatchOptions(priority=priority, window=window)
        )
    finally:
        submission.enqueue.enqueue_start = saved


class Workers:
    """Real ``celery -A gateway_site worker`` processes on a queue of their own."""

    def __init__(self, tmp_path: Path, loglevel: str = "WARNING", **env):
        self.loglevel = loglevel
        self.queue = test_queue("sched")  # inside the run's prefix: the session clean-up finds it
        self.tmp_path = tmp_path
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopped = False

    def start(self, name: str, *pool: str) -> subprocess.Popen:
        """A worker on this set's queue: the default prefork pool (tests.workers.DEFAULT_POOL) unless
        ``pool`` says otherwise."""
        env = {k: str(v) for k, v in self.env.items()}
        log_path = self.tmp_path / f"{name}.log"
        proc = start_worker(
            name, self.queue, log_path, pool=pool or DEFAULT_POOL, loglevel=self.loglevel, **env
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

        client = redis.Redis.from_url(self.env.get("CELERY_BROKER_URL") or settings.CELERY_BROKER_URL)
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

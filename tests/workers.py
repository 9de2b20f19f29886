"""Real `celery -A gateway_site worker` processes for tests (the one shared launcher).

Queue names come from `test_queue()`: they start with this run's GATEWAY_REDIS_PREFIX, so the session
finalizer in tests/conftest.py removes the queue and its kombu binding even if a test dies half-way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def test_queue(what: str = "q") -> str:
    """A per-test Celery queue name inside this run's key prefix."""
    return f"{settings.GATEWAY_REDIS_PREFIX}{what}-{uuid.uuid4().hex[:10]}"


test_queue.__test__ = False  # not a test, whatever pytest's name rules say


def database_url() -> str:
    """This test run's database as a URL for subprocesses (with the password, where there is one: a
    default Debian PostgreSQL gets the 'gateway' password role from scripts/ensure_services.sh)."""
    db = connection.settings_dict
    user = quote(db["USER"] or "postgres", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def worker_env(queue: str, **extra: str) -> dict[str, str]:
    """The environment of a worker that uses this test run's database, Redis, key prefix and queue."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="gateway_site.settings.test",
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
        CELERY_TASK_ALWAYS_EAGER="0",
        CELERY_TASK_DEFAULT_QUEUE=queue,
        DJANGO_LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def start_worker(
    name: str, queue: str, log_path: Path, *, loglevel: str = "WARNING", **extra_env: str
) -> subprocess.Popen:
    """One solo-pool worker consuming only `queue`; its output goes to `log_path`. cwd = this checkout."""
    cmd = [
        sys.executable, "-m", "celery", "-A", "gateway_site", "worker", "-P", "solo", "-Q", queue,
        "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle",
        "--without-heartbeat", "-l", loglevel,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=worker_env(queue, **extra_env),
        stdout=open(log_path, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_worker(proc: subprocess.Popen) -> None:
    """SIGTERM the worker's process group (warm shutdown), SIGKILL if it does not go within 15 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def delete_queue(queue: str) -> None:
    """Remove a test queue and its kombu binding from the broker."""
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.delete(queue, f"_kombu.binding.{queue}")
    finally:
        client.close()

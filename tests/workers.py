"""Real `celery -A gateway_site worker` and `manage.py` subprocesses for tests (the one shared launcher).

Queue names come from `test_queue()`: they start with this run's GATEWAY_REDIS_PREFIX, so the session
finalizer in tests/conftest.py removes the queue and its kombu binding even if a test dies half-way.
Every subprocess gets `subprocess_env()`: this run's database, Redis, broker and key prefix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from tests.servers import stop_process_group

ROOT = Path(__file__).resolve().parents[1]

# The deployment users run: `celery -A gateway_site worker` with Celery's default (prefork) pool and
# several children. Tests start workers this way unless they say why they need something else.
DEFAULT_POOL: tuple[str, ...] = ("-c", "2")


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


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a manage.py or celery subprocess on this run's database, Redis and key prefix."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="gateway_site.settings.test",
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
        DJANGO_LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def worker_env(queue: str, **extra: str) -> dict[str, str]:
    """The environment of a worker that uses this test run's database, Redis, key prefix and queue."""
    return subprocess_env(**{"CELERY_TASK_ALWAYS_EAGER": "0", "CELERY_TASK_DEFAULT_QUEUE": queue, **extra})


def start_worker(
    name: str,
    queue: str,
    log_path: Path,
    *,
    loglevel: str = "WARNING",
    pool: tuple[str, ...] = DEFAULT_POOL,
    **extra_env: str,
) -> subprocess.Popen:
    """One worker consuming only `queue`: Celery's default prefork pool with two children unless `pool`
    says otherwise (e.g. ("-P", "solo") or ("-P", "threads", "-c", "4")); `extra_env` overrides
    settings (GATEWAY_CHUNK_SIZE="50", …); its output goes to `log_path`. cwd = this checkout; its own
    process group (stop_worker signals the group; the pool children are in it)."""
    cmd = [
        sys.executable, "-m", "celery", "-A", "gateway_site", "worker", *pool, "-Q", queue,
        "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle",
        "--without-heartbeat", "-l", loglevel,
    ]  # fmt: skip
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=worker_env(queue, **extra_env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def pool_children(proc: subprocess.Popen) -> list[int]:
    """The pids of a prefork worker's pool children (its live direct children, from /proc; a killed child
    its master has not reaped yet, a zombie, is not one)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == proc.pid and fields[0] != "Z":
            kids.append(int(entry.name))
    return sorted(kids)


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def stop_worker(proc: subprocess.Popen) -> None:
    """SIGTERM the worker's process group (warm shutdown), SIGKILL if it does not go within 15 s."""
    stop_process_group(proc, 15)


def delete_queue(queue: str) -> None:
    """Remove a test queue and its kombu binding from the broker, and the queue's messages that a
    killed worker never acknowledged: kombu keeps those in the broker-wide ``unacked`` hash and any
    later worker on this Redis (the next test run's) would restore them into the deleted queue."""
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.delete(queue, f"_kombu.binding.{queue}")
        for tag, raw in client.hgetall("unacked").items():
            try:
                routing_key = json.loads(raw)[2]
            except (ValueError, IndexError, TypeError):
                continue
            if routing_key == queue:
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)
    finally:
        client.close()


def send_start_batch(batch_id, queue: str) -> None:
    """Queue `batches.start_batch` for the workers on `queue` (through the broker: this process itself
    runs tasks eagerly, and send_task warns about that)."""
    from celery.exceptions import AlwaysEagerIgnored

    from gateway_site import celery_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AlwaysEagerIgnored)
        celery_app.send_task("batches.start_batch", args=[str(batch_id)], queue=queue)


def manage(*args: str) -> str:
    """Run `python manage.py ARGS` in another process on this run's database and Redis (cwd = this
    checkout), as an operator would; asserts it succeeded and returns its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout

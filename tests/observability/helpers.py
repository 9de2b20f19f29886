"""Helpers for observability tests: real Celery worker processes and /metrics parsing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]


def worker_env(queue: str, **extra: str) -> dict:
    env = dict(os.environ)
    db = connection.settings_dict
    env.update(
        DJANGO_SETTINGS_MODULE="gateway_site.settings.test",
        DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
        CELERY_TASK_ALWAYS_EAGER="0",
        CELERY_TASK_DEFAULT_QUEUE=queue,
        DJANGO_LOG_LEVEL="INFO",
        GATEWAY_LOG_FORMAT="json",
    )
    env.update(extra)
    return env


def start_worker(name: str, queue: str, log_path: Path, **extra_env: str) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "celery", "-A", "gateway_site", "worker", "-P", "solo", "-Q", queue,
        "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO",
    ]  # fmt: skip
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=worker_env(queue, **extra_env),
        stdout=open(log_path, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def delete_queue(queue: str) -> None:
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.delete(queue, f"_kombu.binding.{queue}")
    finally:
        client.close()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(sample name, frozenset(labels.items())): value} of a Prometheus text exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed: dict, name: str, **labels) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in parsed.items() if n == name and want <= set(lab))


def metric_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
    return names

"""Helpers for observability tests: real Celery worker processes and /metrics parsing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests import workers


def start_worker(name: str, queue: str, log_path: Path, **extra_env: str) -> subprocess.Popen:
    """A worker (tests/workers.py) that logs JSON at INFO: the log tests read its events."""
    env = {"DJANGO_LOG_LEVEL": "INFO", "GATEWAY_LOG_FORMAT": "json", **extra_env}
    return workers.start_worker(name, queue, log_path, loglevel="INFO", **env)


stop = workers.stop_worker
delete_queue = workers.delete_queue


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

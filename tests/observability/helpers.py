"""Helpers for observability tests: real Celery worker processes and /metrics parsing."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests import workers


def start_worker(name: str, queue: str, log_path: Path, **extra_env: str) -> subprocess.Popen:
    """A worker (tests/workers.py) that logs JSON at INFO: the log tests read its events."""
    env = {"DJANGO_LOG_LEVEL": "INFO", "GATEWAY_LOG_FORMAT": "json", **extra_env}
    return workers.start_worker(name, queue, log_path, loglevel="INFO", **env)


stop = workers.stop_worker
delete_queue = workers.delete_queue


def children_of(pid: int) -> set[int]:
    """The direct children of ``pid`` now (a prefork worker's pool children), from /proc."""
    try:
        return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


class PoolWatch:
    """Every child the given worker processes had while the watch ran (polled every 5 ms, so a pool child
    that lives for one task is seen too): ``with PoolWatch(procs) as seen: ...`` then ``seen.children``."""

    def __init__(self, procs: list[subprocess.Popen]):
        self.procs = procs
        self.children: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pool-watch", daemon=True)

    def _run(self) -> None:
        while True:
            for proc in self.procs:
                self.children |= children_of(proc.pid)
            if self._stop.wait(0.005):
                return

    def __enter__(self) -> PoolWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


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

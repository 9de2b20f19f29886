"""Readiness checks for ``GET /readyz`` (docs/contract.md §7) and the Celery worker heartbeat they rely on.

Checks: database (a round trip), migrations (none unapplied), and in shared mode (REDIS_URL set) Redis
(PING) and Celery workers (at least one worker heartbeat key in Redis, written every
WORKER_HEARTBEAT_SECONDS by a thread of each worker, expiring after WORKER_HEARTBEAT_TTL_SECONDS).
Single-process mode has no Redis and no workers: those checks are reported as "skipped".

``worker_metrics`` never fails readiness (the gateway works without metrics) but is reported as "warn"
when this process's /metrics cannot include this host's worker processes: no multiprocess directory in
use (turned off, or the default could not be created), or a live worker on this host writes to another
directory (each heartbeat carries the worker's directory). ``gateway_worker_metrics_collected`` on
/metrics is 0 in exactly those cases.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from gateway_site.redis import sync_redis

log = logging.getLogger(__name__)

WORKER_HEARTBEAT_SECONDS = 5.0
WORKER_HEARTBEAT_TTL_SECONDS = 30
CHECK_TIMEOUT_SECONDS = 2.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    skipped: bool = False
    warn: bool = False  # reported, does not fail readiness

    def as_dict(self) -> dict:
        state = "skipped" if self.skipped else ("fail" if not self.ok else ("warn" if self.warn else "ok"))
        return {"status": state, "detail": self.detail}


def shared_mode() -> bool:
    return settings.GATEWAY_QUOTA_BACKEND == "redis"


def heartbeat_pattern() -> str:
    return f"{settings.GATEWAY_REDIS_PREFIX}worker-heartbeat:*"


def heartbeat_key(worker: str) -> str:
    return f"{settings.GATEWAY_REDIS_PREFIX}worker-heartbeat:{worker}"


def _redis():
    return sync_redis(timeout=CHECK_TIMEOUT_SECONDS, connect_timeout=CHECK_TIMEOUT_SECONDS)


def check_database() -> Check:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
        return Check("database", True)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return Check("database", False, f"{type(exc).__name__}: {exc}")


_migrations_ok = False


def check_migrations() -> Check:
    """No unapplied migration. Once seen applied, a process does not check again (migrations only move
    forward while it runs)."""
    global _migrations_ok
    if _migrations_ok:
        return Check("migrations", True)
    try:
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:  # noqa: BLE001
        return Check("migrations", False, f"{type(exc).__name__}: {exc}")
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
        return Check("migrations", False, f"{len(plan)} unapplied: {names}")
    _migrations_ok = True
    return Check("migrations", True)


def check_redis() -> Check:
    if not shared_mode():
        return Check("redis", True, "single-process mode", skipped=True)
    try:
        with _redis() as client:
            client.ping()
        return Check("redis", True)
    except Exception as exc:  # noqa: BLE001
        return Check("redis", False, f"{type(exc).__name__}: {exc}")


def check_workers() -> Check:
    if not shared_mode() or settings.CELERY_TASK_ALWAYS_EAGER:
        return Check("celery_workers", True, "tasks run in this process", skipped=True)
    try:
        with _redis() as client:
            workers = sorted(k.decode() for k in client.scan_iter(match=heartbeat_pattern(), count=500))
    except Exception as exc:  # noqa: BLE001
        return Check("celery_workers", False, f"{type(exc).__name__}: {exc}")
    if not workers:
        return Check(
            "celery_workers", False, f"no worker heartbeat in the last {WORKER_HEARTBEAT_TTL_SECONDS} s"
        )
    return Check("celery_workers", True, f"{len(workers)} alive")


def metrics_gap_reason() -> str:
    """Why this process uses no multiprocess directory ("" when it uses one)."""
    if settings.GATEWAY_METRICS_DIR:
        return ""
    source = getattr(settings, "GATEWAY_METRICS_DIR_SOURCE", "")
    problem = getattr(settings, "GATEWAY_METRICS_DIR_PROBLEM", "")
    if source == "unavailable":
        return f"the default multiprocess directory cannot be used ({problem}); set PROMETHEUS_MULTIPROC_DIR"
    if source == "off":
        return "multiprocess metrics files are turned off (GATEWAY_METRICS_DIR=off or an empty PROMETHEUS_MULTIPROC_DIR)"
    return "no multiprocess directory in use (PROMETHEUS_MULTIPROC_DIR)"


def _same_dir(a: str | None, b: str | None) -> bool:
    return (os.path.normpath(a) if a else "") == (os.path.normpath(b) if b else "")


def workers_writing_elsewhere(directory: str) -> list[tuple[str, str]]:
    """(worker, its directory) of the live workers on this host whose heartbeat names another
    multiprocess directory than ``directory`` ("" = none). Workers of other hosts write their own host's
    directory (one scrape target per host); heartbeats without the field (older workers) are skipped."""
    host = socket.gethostname()
    with _redis() as client:
        keys = sorted(client.scan_iter(match=heartbeat_pattern(), count=500))
        values = client.mget(keys) if keys else []
    prefix = heartbeat_key("")
    out = []
    for key, raw in zip(keys, values, strict=True):
        name = key.decode()[len(prefix) :]
        if name.rsplit(":", 1)[0] != host or raw is None:
            continue
        try:
            theirs = json.loads(raw)["metrics_dir"]
        except (ValueError, TypeError, KeyError):
            continue
        if not _same_dir(theirs, directory):
            out.append((name, theirs))
    return out


def check_worker_metrics() -> Check:
    """Can /metrics of this process include this host's worker processes? Never fails readiness."""
    name = "worker_metrics"
    if not shared_mode():
        return Check(name, True, "single-process mode: the engine runs in this process", skipped=True)
    directory = settings.GATEWAY_METRICS_DIR
    if not directory:
        return Check(name, True, f"NOT collected: {metrics_gap_reason()}", warn=True)
    try:
        elsewhere = workers_writing_elsewhere(directory)
    except Exception as exc:  # noqa: BLE001 - Redis down: the redis check fails; this one says so
        return Check(name, True, f"reads {directory}; workers' directories unknown ({type(exc).__name__})")
    if elsewhere:
        listed = ", ".join(f"{w} writes {d or 'no files'}" for w, d in elsewhere[:5])
        return Check(
            name,
            True,
            f"NOT collected from {len(elsewhere)} worker(s) of this host: {listed}; this process reads "
            f"{directory} (start web and workers with the same PROMETHEUS_MULTIPROC_DIR, REDIS_URL and "
            "GATEWAY_REDIS_PREFIX, and the same temp dir)",
            warn=True,
        )
    return Check(name, True, f"collected from {directory}")


def readiness() -> tuple[bool, dict]:
    checks = [check_database(), check_migrations(), check_redis(), check_workers(), check_worker_metrics()]
    ready = all(c.ok for c in checks)
    return ready, {"ready": ready, "checks": {c.name: c.as_dict() for c in checks}}


# ---- worker heartbeat (Celery workers) --------------------------------------------------------------


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def beat_once(name: str | None = None) -> None:
    """The heartbeat's value names the worker's multiprocess directory (check_worker_metrics)."""
    value = json.dumps({"time": time.time(), "metrics_dir": settings.GATEWAY_METRICS_DIR})
    with _redis() as client:
        client.set(heartbeat_key(name or worker_name()), value, ex=WORKER_HEARTBEAT_TTL_SECONDS)


def forget(name: str | None = None) -> None:
    with _redis() as client:
        client.delete(heartbeat_key(name or worker_name()))


class Heartbeat(threading.Thread):
    """A Celery worker's heartbeat: a key with a TTL, refreshed every WORKER_HEARTBEAT_SECONDS."""

    def __init__(self, interval: float = WORKER_HEARTBEAT_SECONDS):
        super().__init__(name="gateway-heartbeat", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()
        self.name_in_redis = worker_name()

    def run(self) -> None:
        while True:
            try:
                beat_once(self.name_in_redis)
            except Exception as exc:  # noqa: BLE001 - Redis down: /readyz shows it; keep trying
                log.warning("worker heartbeat failed: %s", exc)
            if self.stopped.wait(self.interval):
                break
        try:
            forget(self.name_in_redis)
        except Exception:  # noqa: BLE001
            pass

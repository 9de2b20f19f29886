"""Celery signal handlers: request id in task headers, the worker heartbeat for /readyz, the worker
host's /metrics listener (GATEWAY_WORKER_METRICS_BIND), and the Prometheus multiprocess bookkeeping of
exiting worker processes."""

from __future__ import annotations

import logging
import os

from celery.signals import (
    before_task_publish,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from .logs import request_id_var

log = logging.getLogger(__name__)

HEADER = "gateway_request_id"
_heartbeat = None
_tokens: dict[str, object] = {}


def _publish(headers=None, **kwargs) -> None:
    """The current request id travels with the task message."""
    rid = request_id_var.get()
    if rid and headers is not None and not headers.get(HEADER):
        headers[HEADER] = rid


def _prerun(task_id=None, task=None, **kwargs) -> None:
    rid = getattr(task.request, HEADER, None) if task is not None else None
    if not rid and task is not None:
        rid = (getattr(task.request, "headers", None) or {}).get(HEADER)
    if rid and task_id:
        _tokens[task_id] = request_id_var.set(str(rid))


def _postrun(task_id=None, **kwargs) -> None:
    token = _tokens.pop(task_id, None)
    if token is not None:
        request_id_var.reset(token)


def _worker_ready(**kwargs) -> None:
    global _heartbeat
    from django.conf import settings

    from . import worker_metrics
    from .health import Heartbeat

    worker_metrics.start()  # this host's /metrics, when GATEWAY_WORKER_METRICS_BIND is set

    if (
        settings.CELERY_TASK_ALWAYS_EAGER
        or settings.GATEWAY_QUOTA_BACKEND != "redis"
        or _heartbeat is not None
    ):
        return
    _heartbeat = Heartbeat()
    _heartbeat.start()
    log.info("worker heartbeat started", extra={"event": "worker_ready", "worker": _heartbeat.name_in_redis})


def _worker_shutdown(**kwargs) -> None:
    from . import worker_metrics

    worker_metrics.stop()
    if _heartbeat is not None:
        _heartbeat.stopped.set()
        _heartbeat.join(5)
    # the worker's main process (it runs the tasks itself with -P solo/threads) leaves its live gauges
    _mark_dead(os.getpid())


def _mark_dead(pid: int) -> None:
    """Drop ``pid``'s live gauges from the multiprocess directory; its counters and histograms stay, so
    the sums /metrics reports keep counting what exited processes did. Never wipes the directory: the
    web process and other workers of the host share it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def _process_init(**kwargs) -> None:
    """A new pool child (at start, or replacing one that exited): a process that had this pid before and
    died without its exit hook may have left live gauges, which this child would otherwise resume."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from .metrics_dir import remove_live_gauges

        remove_live_gauges(directory, os.getpid())


def _process_shutdown(pid=None, **kwargs) -> None:
    """A pool child exits (worker shutdown, --max-tasks-per-child, pool shrink): drop its live gauges."""
    _mark_dead(pid or os.getpid())


def connect() -> None:
    before_task_publish.connect(_publish, weak=False, dispatch_uid="obs-publish")
    task_prerun.connect(_prerun, weak=False, dispatch_uid="obs-prerun")
    task_postrun.connect(_postrun, weak=False, dispatch_uid="obs-postrun")
    worker_ready.connect(_worker_ready, weak=False, dispatch_uid="obs-worker-ready")
    worker_shutdown.connect(_worker_shutdown, weak=False, dispatch_uid="obs-worker-shutdown")
    worker_process_init.connect(_process_init, weak=False, dispatch_uid="obs-process-init")
    worker_process_shutdown.connect(_process_shutdown, weak=False, dispatch_uid="obs-process-shutdown")

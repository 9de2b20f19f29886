"""Celery tasks: thin wrappers that pass ids to batches.execution.

    start_batch(batch_id)   → marks the batch running, makes sure dispatchers run
    dispatch(token)         → one dispatcher slice (GATEWAY_DISPATCH_SLICE_SECONDS): fair, provider-aware
                              claiming across every queued batch; then re-enqueues while work remains

At most GATEWAY_DISPATCHERS dispatch tasks are alive cluster-wide (a Redis set with heartbeats).
Every worker also runs the reconciler thread (dead workers' claims, overdue batches, dispatchers
alive); acks_late + reject_on_worker_lost (settings) redeliver a lost task as well. SIGTERM is a warm
shutdown bounded by GATEWAY_SHUTDOWN_SECONDS (batches.execution.shutdown).
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_process_init, worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings

from . import execution

log = logging.getLogger(__name__)


@shared_task(name="batches.start_batch", ignore_result=True)
def start_batch(batch_id: str) -> bool:
    runnable = execution.start_batch(str(batch_id))
    if runnable:
        ensure_dispatchers()
    return runnable


@shared_task(name="batches.dispatch", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def dispatch(token: str) -> dict:
    report = execution.run_dispatcher_task(str(token), _send_dispatch)
    return {
        "claimed": report.claimed,
        "written": report.written,
        "released": report.released,
        "finalized": len(report.finalized),
    }


def _send_dispatch(token: str) -> None:
    dispatch.delay(token)


def ensure_dispatchers() -> None:
    """Make sure dispatchers serve the queued work: up to GATEWAY_DISPATCHERS dispatch tasks on the
    broker, or, in single-process mode (eager Celery), the one in-process dispatcher."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _ensure_local_reaper()
        execution.ensure_local_dispatcher(background=False)
        return
    execution.DispatcherSet().ensure(_send_dispatch)


_reaper: execution.Reaper | None = None


def _ensure_local_reaper() -> None:
    """Single-process web app: the same reconciler, on a thread of this process."""
    global _reaper
    if settings.GATEWAY_BACKGROUND_EAGER and _reaper is None:
        _reaper = execution.Reaper(lambda: execution.ensure_local_dispatcher(background=True))
        _reaper.start()


@worker_ready.connect
def _start_reaper(**kwargs) -> None:
    global _reaper
    if settings.CELERY_TASK_ALWAYS_EAGER or _reaper is not None:
        return
    _reaper = execution.Reaper(ensure_dispatchers)
    _reaper.start()
    log.info("gateway reconciler started (every %.1f s)", execution.Reaper.interval())


@worker_shutdown.connect
def _stop_reaper(**kwargs) -> None:
    if _reaper is not None:
        _reaper.stopped.set()


@worker_process_init.connect
def _pool_child_started(**kwargs) -> None:
    """A prefork pool child: SIGTERM winds its running slice down instead of killing it mid-call; it
    has no reconciler of its own (the master's runs)."""
    global _reaper
    _reaper = None
    execution.shutdown.install_child_handler()


@worker_shutting_down.connect
def _warm_shutdown(**kwargs) -> None:
    """The worker's main process got SIGTERM (warm shutdown): slices here and in the pool children stop
    claiming and finish within GATEWAY_SHUTDOWN_SECONDS (batches.execution.shutdown)."""
    execution.shutdown.on_worker_shutting_down()

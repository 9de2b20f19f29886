"""Handing a stored batch to the execution engine once its transaction has committed: Celery's
``start_batch`` (and dispatchers), or a background thread of this process in single-process mode."""

from __future__ import annotations

import contextvars
import logging
import threading

from django.conf import settings
from django.db import connections

log = logging.getLogger(__name__)


def enqueue_start(batch_id: str) -> None:
    """Hand a stored batch to the execution engine (called on commit).

    With workers, this makes sure dispatchers run (``ensure_dispatchers``: dispatch tasks queued from
    here) and queues `start_batch`. In single-process mode (GATEWAY_BACKGROUND_EAGER) the eager
    task runs on a background thread of this process instead of inside the submitting request; the
    thread is not a daemon, so a command-line submitter's process stays until its batch has ended.
    """
    from batches.tasks import start_batch  # the engine's module; imported late to keep apps decoupled

    if settings.GATEWAY_BACKGROUND_EAGER:
        run = contextvars.copy_context().run  # the request id (logs) follows the batch onto the thread
        threading.Thread(target=run, args=(_run_in_background, batch_id), name=f"batch-{batch_id}").start()
        return
    try:
        # the submission itself starts dispatchers when fewer than GATEWAY_DISPATCHERS are alive (no wait
        # for start_batch to reach a free worker child, nor for the reconciler's next pass); running
        # dispatchers see the new batch at their next look at the queue (0.5 s)
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            from batches.tasks import ensure_dispatchers

            ensure_dispatchers()
        start_batch.delay(batch_id)
    except Exception:  # the batch is stored: the workers' reconciler starts it once the broker is back
        log.exception("batch %s stored but could not be enqueued; the reconciler will start it", batch_id)


def _run_in_background(batch_id: str) -> None:
    from batches.tasks import start_batch

    try:
        start_batch.delay(batch_id)  # eager: runs here, on this thread
    except Exception:
        log.exception("batch %s failed in the single-process engine thread", batch_id)
    finally:
        connections.close_all()

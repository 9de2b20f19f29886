"""The delivery task: thin, calls worker.deliver_due (one bounded slice)."""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from django.conf import settings
from django.db import connections

from . import worker

log = logging.getLogger("webhooks")


@shared_task(name="webhooks.deliver_due", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def deliver_due() -> dict:
    report = worker.deliver_due()
    if report.more:
        kick(0.0)
    return {"attempted": report.attempted, "delivered": report.delivered}


def kick(countdown: float) -> None:
    """The due queue's kick (batches.execution.due): the task in ``countdown`` seconds (at most one
    reconciler interval), or now. Single-process mode: on a thread of this process, so a finalizing
    batch thread never waits for a receiver."""
    if settings.GATEWAY_BACKGROUND_EAGER:
        threading.Thread(target=_run_here, name="webhooks-delivery", daemon=True).start()
        return
    if countdown > 0:
        deliver_due.apply_async(countdown=countdown)
    else:
        deliver_due.delay()


def _run_here() -> None:
    try:
        deliver_due.apply()
    except Exception:  # noqa: BLE001 - logged; the row stays due for the next pass
        log.exception("webhook delivery slice failed")
    finally:
        connections.close_all()

"""Celery tasks: thin wrappers that pass ids to batches.execution.

    start_batch(batch_id)                       → marks the batch running, enqueues one execute_chunk per
                                                  GATEWAY_CHUNK_SIZE items (several workers share a batch)
    execute_chunk(batch_id, seq_from, seq_to)   → claims and runs that range, steals leftovers, finalizes

Every worker also runs a reaper thread that re-enqueues batches whose items sit under expired claims
(a worker was killed); acks_late + reject_on_worker_lost (settings) redeliver a lost task as well.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from . import execution

log = logging.getLogger(__name__)


@shared_task(name="batches.start_batch", ignore_result=True)
def start_batch(batch_id: str) -> int:
    ranges = execution.start_batch(str(batch_id))
    for seq_from, seq_to in ranges:
        execute_chunk.delay(str(batch_id), seq_from, seq_to)
    return len(ranges)


@shared_task(name="batches.execute_chunk", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def execute_chunk(batch_id: str, seq_from: int | None = None, seq_to: int | None = None) -> dict:
    report = execution.execute_chunk(str(batch_id), seq_from, seq_to)
    return {
        "claimed": report.claimed,
        "written": report.written,
        "dropped": report.dropped,
        "finalized": report.finalized,
    }


def _enqueue_sweep(batch_id: str) -> None:
    execute_chunk.delay(batch_id, None, None)


_reaper: execution.Reaper | None = None


@worker_ready.connect
def _start_reaper(**kwargs) -> None:
    global _reaper
    if settings.CELERY_TASK_ALWAYS_EAGER or _reaper is not None:
        return
    _reaper = execution.Reaper(_enqueue_sweep)
    _reaper.start()
    log.info("gateway reaper started (every %.1f s)", max(1.0, settings.GATEWAY_CLAIM_LEASE_SECONDS / 3))


@worker_shutdown.connect
def _stop_reaper(**kwargs) -> None:
    if _reaper is not None:
        _reaper.stopped.set()

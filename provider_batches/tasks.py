"""The provider-batch route's one Celery task: thin, it runs a bounded slice of the due work
(provider_batches.due). Kicked by every reconciler pass (batches.execution.due) with a countdown of at
most one reconciler interval; nothing else schedules it."""

from __future__ import annotations

from celery import shared_task

from . import due


@shared_task(name="provider_batches.work_due", ignore_result=True)
def work_due() -> dict[str, int]:
    return due.work_slice()

"""Due work: rows with a ``due_at`` in PostgreSQL, picked up by a driver the standard deployment runs.

Work that must happen later and survive any crash — a provider batch to poll, a webhook to deliver
again — is a row with an indexed ``due_at`` column in its own app, never a long Celery countdown (a
countdown past ``CELERY_VISIBILITY_TIMEOUT`` is redelivered early, and a countdown dies with the broker
message). The driver is the reconciler every Celery worker's main process already runs (and the
single-process web app's, see ``reaper.py``): each pass calls ``kick_due()``, which asks every
registered ``DueQueue`` when its next row is due and, when that is within one pass, enqueues the
queue's thin Celery task (``kick(countdown)``, a countdown of at most one reconciler interval). No
extra process is needed beyond ``celery -A gateway_site worker`` and the web app.

The task claims its due rows with ``claim_due`` (``SELECT … FOR UPDATE SKIP LOCKED``, ``due_at``
pushed forward by a claim lease in the same transaction), so workers never work one row twice at
once, and a worker killed mid-row leaves the row due again when the lease passes. Working a row ends
with its next ``due_at`` (or none when done). A queue may also be kicked directly when a row is due
now (a batch just ended): ``kick_now(name)``.

Apps above ``batches`` register their queue in ``AppConfig.ready`` (``register``); this module
imports none of them.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

log = logging.getLogger("batches.due")


@dataclass(frozen=True)
class DueQueue:
    """One kind of due work.

    ``next_due()``: when the earliest row is due (None: nothing pending) — one indexed query.
    ``kick(countdown)``: enqueue the queue's Celery task, to run in ``countdown`` seconds (0: now).
    """

    name: str
    next_due: Callable[[], dt.datetime | None]
    kick: Callable[[float], Any]


_queues: dict[str, DueQueue] = {}


def register(queue: DueQueue) -> None:
    """Install a queue (idempotent per name: ``AppConfig.ready`` may run more than once in tests)."""
    _queues[queue.name] = queue


def registered() -> list[DueQueue]:
    return list(_queues.values())


def horizon_seconds() -> float:
    """How far ahead a reconciler pass looks: one pass interval (the next pass covers the rest)."""
    return max(1.0, float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3)


def kick_due(now: dt.datetime | None = None) -> list[str]:
    """One pass over the registered queues: kick those with a row due within the horizon. A queue
    that fails is logged and skipped; the others still run."""
    now = now or timezone.now()
    horizon = horizon_seconds()
    kicked: list[str] = []
    for queue in registered():
        try:
            due = queue.next_due()
            if due is None:
                continue
            wait = (due - now).total_seconds()
            if wait <= horizon:
                queue.kick(max(0.0, wait))
                kicked.append(queue.name)
        except Exception:  # noqa: BLE001 - one broken queue must not stop the reconciler or the others
            log.exception("due queue %s: kick failed", queue.name)
    return kicked


def kick_now(name: str) -> bool:
    """Enqueue a queue's task at once (e.g. a webhook event just created). False: no such queue."""
    queue = _queues.get(name)
    if queue is None:
        return False
    queue.kick(0.0)
    return True


def claim_due(
    qs: models.QuerySet, *, lease_seconds: float, limit: int = 50, now: dt.datetime | None = None
) -> list[Any]:
    """Claim up to ``limit`` rows of ``qs`` whose ``due_at`` has come, oldest first: locked with SKIP
    LOCKED, and their ``due_at`` moved ``lease_seconds`` ahead in the same transaction, so another
    worker does not take them while this one works them, and a crash makes them due again later.
    The caller sets each row's real next ``due_at`` (or clears it) when done."""
    now = now or timezone.now()
    with transaction.atomic():
        rows = list(qs.select_for_update(skip_locked=True).filter(due_at__lte=now).order_by("due_at")[:limit])
        if rows:
            qs.model.objects.filter(pk__in=[r.pk for r in rows]).update(
                due_at=now + dt.timedelta(seconds=lease_seconds)
            )
    return rows

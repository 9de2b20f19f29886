"""The safety net for an event the batch_finished receiver never wrote (its process died between the
finalizing commit and the insert): ended batches with a webhook (their own URL or the team's default)
and no event row get one. Run from the due queue's ``next_due`` — the reconciler pass every worker
makes — at most once per SWEEP_EVERY_SECONDS per process; ``events.create_event`` is idempotent, so a
sweep racing the receiver makes no second event. Index batch_completed bounds the scan."""

from __future__ import annotations

import datetime as dt
import logging
import time

from django.db.models import Q
from django.utils import timezone

from batches.models import Batch

from . import events, selectors, services

log = logging.getLogger("webhooks")

SWEEP_EVERY_SECONDS = 60.0
GRACE = dt.timedelta(seconds=30)  # the receiver's own insert comes milliseconds after the commit
LOOKBACK = dt.timedelta(hours=1)
LIMIT = 200

_last_sweep = [float("-inf")]


def missed(now: dt.datetime) -> list[Batch]:
    has_url = ~Q(webhook_url="") | Q(team__webhook__url__gt="")
    return list(
        Batch.objects.filter(completed_at__gte=now - LOOKBACK, completed_at__lt=now - GRACE)
        .filter(has_url, webhook_event__isnull=True)
        .order_by("completed_at")[:LIMIT]
    )


def sweep(now: dt.datetime | None = None) -> int:
    """Create the missing events; returns how many were created (and kicks the queue if any)."""
    made = 0
    for batch in missed(now or timezone.now()):
        _, created = events.create_event(batch)
        made += int(created)
    if made:
        log.warning("webhooks: %d batch end(s) had no event (a process died after finalizing); created", made)
        services.kick()
    return made


def next_due() -> dt.datetime | None:
    """The due queue's ``next_due``, with the throttled sweep first (a failed sweep is logged only)."""
    if time.monotonic() - _last_sweep[0] >= SWEEP_EVERY_SECONDS:
        _last_sweep[0] = time.monotonic()
        try:
            sweep()
        except Exception:  # noqa: BLE001 - the deliveries due must still be kicked
            log.exception("webhooks: sweep for missed events failed")
    return selectors.next_due()

"""The batch end → one event row (docs/contract.md §6), then the delivery is kicked.

``on_batch_finished`` listens to ``batches.signals.batch_finished`` (sent once the finalizing
transaction has committed). It writes at most one ``WebhookEvent`` per batch — the one-to-one on
``batch`` is the unique constraint, so a second signal for the same batch (a finalize race, a
redelivered task) inserts nothing — and asks the due queue to run now (``due.kick_now``): the POST
itself happens in the ``webhooks.deliver_due`` task, never in the finalizing worker's path.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from batches.models import Batch, BatchStatus

from . import selectors, services
from .models import WebhookEvent

log = logging.getLogger("webhooks")

EVENT_TYPES = {
    BatchStatus.COMPLETED: "batch.completed",
    BatchStatus.FAILED: "batch.failed",
    BatchStatus.EXPIRED: "batch.expired",
    BatchStatus.CANCELLED: "batch.cancelled",
}


# how a surface above names a batch to its owner (openai_api: the "batch_…" id the openai SDK retrieves,
# for a batch created through /v1), installed in its AppConfig.ready; none answers: the native id
_public_ids: list[Callable[[Batch], str | None]] = []


def register_public_id(name_of: Callable[[Batch], str | None]) -> None:
    if name_of not in _public_ids:
        _public_ids.append(name_of)


def public_id(batch: Batch) -> str:
    """The id the event's ``data.id`` carries: the one the batch's owner reads it by."""
    for name_of in _public_ids:
        if name := name_of(batch):
            return name
    return str(batch.pk)


def on_batch_finished(sender, batch: Batch, **kwargs) -> None:
    """Signal receiver: never raises into the finalizer (a failure is logged; the batch is final)."""
    try:
        event, created = create_event(batch)
    except Exception:  # noqa: BLE001 - the batch has ended whatever happens to its webhook
        log.exception("batch %s: could not create its webhook event", batch.pk)
        return
    if event is not None and created:
        services.kick()


def event_body(event_id: str, event_type: str, created_at: dt.datetime, batch_id: str) -> str:
    """The event as sent (docs/contract.md §6); stored, so every attempt sends the same bytes."""
    doc = {
        "object": "event",
        "id": event_id,
        "type": event_type,
        "created_at": int(created_at.timestamp()),
        "data": {"id": batch_id},
    }
    return json.dumps(doc, separators=(",", ":"))


def create_event(batch: Batch) -> tuple[WebhookEvent | None, bool]:
    """The batch's event: (event, True) when this call created it, (existing, False), or (None, False)
    when the batch has no webhook (no URL of its own, no team default) or has not ended."""
    event_type = EVENT_TYPES.get(batch.status)
    if event_type is None or batch.completed_at is None:
        return None, False
    url = batch.webhook_url or selectors.team_default_url(batch.team_id)
    if not url:
        return None, False
    services.ensure_team_webhook(batch.team_id)  # a batch with a URL always gets signed events
    now = timezone.now()
    event_id = f"evt_{uuid.uuid4().hex}"
    row = WebhookEvent(
        id=event_id,
        batch_id=batch.pk,
        team_id=batch.team_id,
        type=event_type,
        url=url,
        body=event_body(event_id, event_type, now, public_id(batch)),
        due_at=now,
        give_up_at=now + dt.timedelta(seconds=float(settings.GATEWAY_WEBHOOK_MAX_AGE_SECONDS)),
    )
    WebhookEvent.objects.bulk_create([row], ignore_conflicts=True)  # INSERT … ON CONFLICT DO NOTHING
    event = WebhookEvent.objects.get(batch_id=batch.pk)
    return event, event.id == event_id

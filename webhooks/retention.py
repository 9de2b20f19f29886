"""Retention of the webhook delivery log (listed in observability.retention.PURGERS, run by
``manage.py purge_old_data``): with GATEWAY_RETENTION_DAYS on, events created before the cutoff that
are no longer pending are deleted with their attempts. CHUNK events per transaction; safe to repeat."""

from __future__ import annotations

import datetime as dt

from django.db import transaction

from .models import DeliveryAttempt, EventState, WebhookEvent

CHUNK = 2000


def purge_deliveries(
    cutoff: dt.datetime | None, dry_run: bool = False, now: dt.datetime | None = None
) -> int | None:
    if cutoff is None:
        return None
    old = WebhookEvent.objects.filter(created_at__lt=cutoff).exclude(state=EventState.PENDING)
    if dry_run:
        return old.count()
    total = 0
    while True:
        with transaction.atomic():
            ids = list(old.order_by("pk").values_list("pk", flat=True)[:CHUNK])
            if not ids:
                return total
            DeliveryAttempt.objects.filter(event_id__in=ids).delete()
            total += WebhookEvent.objects.filter(pk__in=ids).delete()[0]

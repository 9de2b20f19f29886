"""Retention of the interactive request log (listed in observability.retention.PURGERS, run by
``manage.py purge_old_data``): rows older than GATEWAY_INTERACTIVE_LOG_RETENTION_DAYS are deleted
(0: kept); with GATEWAY_RETENTION_DAYS on, the prompts and answers kept for opted-in teams are dropped
from rows older than that cutoff (the metadata stays). CHUNK rows per transaction; safe to repeat."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import transaction

from .models import InteractiveCall

CHUNK = 2000


def purge_calls(
    cutoff: dt.datetime | None, dry_run: bool = False, now: dt.datetime | None = None
) -> int | None:
    days = int(settings.GATEWAY_INTERACTIVE_LOG_RETENTION_DAYS)
    if not days and cutoff is None:
        return None
    now = now or dt.datetime.now(dt.UTC)
    old = InteractiveCall.objects.filter(created_at__lt=now - dt.timedelta(days=days)) if days else None
    content = (
        InteractiveCall.objects.filter(created_at__lt=cutoff).exclude(request_body=None, response_body=None)
        if cutoff is not None
        else None
    )
    if dry_run:
        found = (old.count() if old is not None else 0) + (content.count() if content is not None else 0)
        return found if found or cutoff is not None else None
    total = 0
    while old is not None:
        with transaction.atomic():
            ids = list(old.order_by("pk").values_list("pk", flat=True)[:CHUNK])
            if not ids:
                break
            total += InteractiveCall.objects.filter(pk__in=ids).delete()[0]
    while content is not None:
        with transaction.atomic():
            ids = list(content.order_by("pk").values_list("pk", flat=True)[:CHUNK])
            if not ids:
                break
            total += InteractiveCall.objects.filter(pk__in=ids).update(request_body=None, response_body=None)
    return (
        total if total or cutoff is not None else None
    )  # retention off: reported only when it did something

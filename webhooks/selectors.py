"""Reads: the due queue's next row, a team's default URL and signing secrets, a batch's event and its
attempts (the admin, the dashboard's batch page)."""

from __future__ import annotations

import datetime as dt

from django.db.models import Min

from batches.models import Batch

from . import signing
from .models import DeliveryAttempt, EventState, TeamWebhook, WebhookEvent


def next_due() -> dt.datetime | None:
    """When the earliest pending delivery is due (None: nothing pending); index webhookevent_due."""
    return WebhookEvent.objects.filter(state=EventState.PENDING).aggregate(due=Min("due_at"))["due"]


def team_default_url(team_id: int) -> str:
    return TeamWebhook.objects.filter(team_id=team_id).values_list("url", flat=True).first() or ""


def signing_secrets(team_id: int, now: dt.datetime) -> list[str]:
    """The team's secrets that sign now (both during a rotation's overlap); [] when it has none."""
    hook = TeamWebhook.objects.filter(team_id=team_id).first()
    if hook is None:
        return []
    return signing.active_secrets(hook.secret, hook.previous_secret, hook.rotated_at, now)


def event_for_batch(batch: Batch) -> WebhookEvent | None:
    return WebhookEvent.objects.filter(batch=batch).first()


def attempts_of(event: WebhookEvent) -> list[DeliveryAttempt]:
    return list(DeliveryAttempt.objects.filter(event=event).order_by("started_at", "pk"))

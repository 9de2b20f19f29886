"""Writes: a team's webhook secret and default URL, and redelivery of an event."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from batches.execution import due
from batches.submission import webhook_url

from . import signing
from .models import EventState, TeamWebhook, WebhookEvent

log = logging.getLogger("webhooks")

QUEUE = "webhooks"  # the due queue (batches.execution.due) of webhook deliveries


def ensure_team_webhook(team_id: int) -> tuple[TeamWebhook, bool]:
    """The team's webhook row, created with a new secret if it has none: (row, created)."""
    hook = TeamWebhook.objects.filter(team_id=team_id).first()
    if hook is not None:
        return hook, False
    try:
        with transaction.atomic():
            return TeamWebhook.objects.create(team_id=team_id, secret=signing.new_secret()), True
    except IntegrityError:  # created meanwhile by another process
        return TeamWebhook.objects.get(team_id=team_id), False


def check_url(url: str) -> str:
    """The URL when a team default may be set to it (same rule as a batch's webhook_url), else
    webhook_url.WebhookUrlError. "" clears it."""
    if url == "":
        return ""
    return webhook_url.check(url, allow_private=bool(settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE))


def set_team_url(team_id: int, url: str) -> TeamWebhook:
    checked = check_url(url)
    hook, _ = ensure_team_webhook(team_id)
    hook.url = checked
    hook.save(update_fields=["url", "updated_at"])
    return hook


def rotate_secret(team_id: int, now: dt.datetime | None = None) -> TeamWebhook:
    """A new secret; the old one keeps signing for signing.OVERLAP (deliveries carry both)."""
    ensure_team_webhook(team_id)
    with transaction.atomic():
        hook = TeamWebhook.objects.select_for_update().get(team_id=team_id)
        hook.previous_secret, hook.secret = hook.secret, signing.new_secret()
        hook.rotated_at = now or timezone.now()
        hook.save(update_fields=["secret", "previous_secret", "rotated_at", "updated_at"])
    return hook


def redeliver(event_ids: list[str]) -> int:
    """Make events due now again (same webhook-id, a fresh retry window), then kick the queue.
    Returns how many were made due."""
    now = timezone.now()
    window = dt.timedelta(seconds=float(settings.GATEWAY_WEBHOOK_MAX_AGE_SECONDS))
    n = WebhookEvent.objects.filter(pk__in=event_ids).update(
        state=EventState.PENDING, due_at=now, give_up_at=now + window
    )
    if n:
        kick()
    return n


def kick() -> None:
    """Run the delivery task now (due.kick_now); with the broker down the reconciler kicks it later."""
    try:
        due.kick_now(QUEUE)
    except Exception:  # noqa: BLE001 - the due row stays; nothing is lost
        log.warning("webhook delivery not kicked (the reconciler will)", exc_info=True)

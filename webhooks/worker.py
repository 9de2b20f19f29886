"""One slice of due deliveries: claim a due event (``due.claim_due``: SKIP LOCKED, leased), POST it,
log the attempt, set its next ``due_at`` (exponential backoff) or end it. A worker killed mid-attempt
leaves the row due again when the lease (timeout + LEASE_MARGIN_SECONDS) has passed; the next attempt
carries the same ``webhook-id``."""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from batches.execution import due
from gateway_engine.backoff import capped_exponential

from . import delivery, selectors, signing
from .models import AttemptOutcome, DeliveryAttempt, EventState, WebhookEvent

log = logging.getLogger("webhooks")

LEASE_MARGIN_SECONDS = 5.0
SLICE_SECONDS = 20.0  # one task works due events for at most about this long, then hands over
SLICE_EVENTS = 50


@dataclass
class SliceReport:
    attempted: int = 0
    delivered: int = 0
    more: bool = False  # stopped with due work possibly left (the task kicks the queue again)


def lease_seconds() -> float:
    return float(settings.GATEWAY_WEBHOOK_TIMEOUT_SECONDS) + LEASE_MARGIN_SECONDS


def backoff_seconds(attempts: int) -> float:
    """Wait after the ``attempts``-th failed attempt: base × 2^(attempts−1), capped."""
    base = float(settings.GATEWAY_WEBHOOK_RETRY_BASE_SECONDS)
    cap = float(settings.GATEWAY_WEBHOOK_RETRY_CAP_SECONDS)
    return capped_exponential(base, cap, attempts - 1)


def deliver_due(*, seconds: float = SLICE_SECONDS, max_events: int = SLICE_EVENTS) -> SliceReport:
    report = SliceReport()
    end_at = time.monotonic() + seconds
    pending = WebhookEvent.objects.filter(state=EventState.PENDING)
    while report.attempted < max_events and time.monotonic() < end_at:
        rows = due.claim_due(pending, lease_seconds=lease_seconds(), limit=1)
        if not rows:
            return report
        outcome = attempt(rows[0])
        report.attempted += 1
        report.delivered += int(outcome.delivered)
    report.more = True
    return report


def attempt(event: WebhookEvent) -> delivery.Outcome:
    """One signed POST of ``event`` (fresh timestamp, same id), logged and scheduled."""
    started = timezone.now()
    body = event.body.encode()
    secrets = selectors.signing_secrets(event.team_id, started)
    if not secrets:  # the team's row was deleted after the event was made: nothing can sign it
        outcome = delivery.Outcome(refused=True, error="the team has no webhook secret")
    else:
        headers = signing.headers(event.id, int(time.time()), body, secrets)
        outcome = delivery.post(
            event.url,
            body,
            headers,
            timeout=float(settings.GATEWAY_WEBHOOK_TIMEOUT_SECONDS),
            allow_private=bool(settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE),
        )
    record(event.pk, outcome, started)
    return outcome


def _outcome_of(outcome: delivery.Outcome) -> str:
    if outcome.delivered:
        return AttemptOutcome.DELIVERED
    return AttemptOutcome.REFUSED if outcome.refused else AttemptOutcome.FAILED


def record(event_id: str, outcome: delivery.Outcome, started: dt.datetime) -> WebhookEvent:
    """Log the attempt and move the event on: delivered, refused (not retried), due again after the
    backoff, or failed for good past ``give_up_at``. An event another worker has ended meanwhile (its
    lease ran out while this attempt was slow) keeps its state; the attempt is still logged."""
    now = timezone.now()
    with transaction.atomic():
        event = WebhookEvent.objects.select_for_update().get(pk=event_id)
        event.attempts += 1
        kind = _outcome_of(outcome)
        error = outcome.error or ("" if outcome.delivered else f"HTTP {outcome.status_code}")
        DeliveryAttempt.objects.create(
            event=event, number=event.attempts, started_at=started, outcome=kind,
            status_code=outcome.status_code, latency_ms=outcome.latency_ms, address=outcome.address,
            error=error[:2000], response_excerpt=outcome.excerpt,
        )  # fmt: skip
        if event.state == EventState.PENDING:
            _advance(event, kind, error, now)
        event.save(update_fields=["attempts", "state", "due_at", "delivered_at", "last_error"])
    level = logging.INFO if kind == AttemptOutcome.DELIVERED else logging.WARNING
    log.log(
        level, "webhook %s attempt %d: %s %s", event.id, event.attempts, kind, error,
        extra={"event": "webhook_attempt", "webhook_id": event.id, "batch_id": str(event.batch_id),
               "outcome": kind, "status_code": outcome.status_code, "latency_ms": outcome.latency_ms},
    )  # fmt: skip
    return event


def _advance(event: WebhookEvent, kind: str, error: str, now: dt.datetime) -> None:
    event.last_error = error[:2000]
    if kind == AttemptOutcome.DELIVERED:
        event.state, event.due_at, event.delivered_at = EventState.DELIVERED, None, now
    elif kind == AttemptOutcome.REFUSED:
        event.state, event.due_at = EventState.REFUSED, None
    else:
        next_at = now + dt.timedelta(seconds=backoff_seconds(event.attempts))
        if next_at > event.give_up_at:
            event.state, event.due_at = EventState.FAILED, None
        else:
            event.due_at = next_at

"""A team's webhook default and secrets, one event per batch end, and the log of its delivery attempts."""

from __future__ import annotations

from django.db import models

from batches.models import Batch
from teams.models import Team


class TeamWebhook(models.Model):
    """The team's default ``webhook_url`` (used when a batch names none) and its signing secret
    (``whsec_`` + base64 of 32 random bytes). After a rotation the previous secret still signs for
    ``signing.OVERLAP`` (24 h) from ``rotated_at``: deliveries carry both signatures."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="webhook")
    url = models.CharField(
        max_length=2048, blank=True, default="", help_text="Default webhook_url of the team's batches."
    )
    secret = models.CharField(max_length=128, help_text="whsec_…: receivers verify signatures with it.")
    previous_secret = models.CharField(max_length=128, blank=True, default="")
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "team webhook"

    def __str__(self) -> str:
        return f"webhook of {self.team_id}"


class EventState(models.TextChoices):
    PENDING = "pending"  # due (due_at) or being attempted
    DELIVERED = "delivered"  # a 2xx answer
    FAILED = "failed"  # no 2xx before give_up_at
    REFUSED = "refused"  # the target is not allowed (GATEWAY_WEBHOOK_ALLOW_PRIVATE off); not retried


class WebhookEvent(models.Model):
    """One event per batch end (the one-to-one is the unique constraint: a finalize race or a second
    signal never makes two). ``id`` is the ``webhook-id`` of every attempt; ``body`` the exact bytes
    every attempt sends. Due work (batches.execution.due): ``due_at`` set while pending."""

    id = models.CharField(primary_key=True, max_length=40, editable=False)
    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, related_name="webhook_event")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    type = models.CharField(max_length=32)
    url = models.CharField(max_length=2048)
    body = models.TextField()
    state = models.CharField(max_length=16, choices=EventState.choices, default=EventState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    due_at = models.DateTimeField(null=True, blank=True)
    give_up_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["due_at"], name="webhookevent_due", condition=models.Q(state="pending")),
            models.Index(fields=["created_at"], name="webhookevent_created"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.batch_id}"


class AttemptOutcome(models.TextChoices):
    DELIVERED = "delivered"
    FAILED = "failed"
    REFUSED = "refused"


class DeliveryAttempt(models.Model):
    """One POST of an event (or one refused target): what came back, how long it took, what went wrong."""

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    number = models.PositiveIntegerField(help_text="1 for the first attempt of this event.")
    started_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    address = models.CharField(max_length=64, blank=True, default="", help_text="The address connected to.")
    error = models.TextField(blank=True, default="")
    response_excerpt = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["event", "started_at", "pk"]

    def __str__(self) -> str:
        return f"{self.event_id} #{self.number} {self.outcome}"

"""One row per provider batch (a chunk): its intent (stored, with the claims of its items, BEFORE the
create call), what the provider reports, and when it is next due (``due_at``: the due-work seam,
batches.execution.due)."""

from __future__ import annotations

import secrets

from django.db import models


def new_chunk_id() -> str:
    """``pb_<hex>``: a provider-batch id that is also a valid Anthropic custom-id prefix
    (``^[a-zA-Z0-9_-]{1,64}$`` with ``-<n>`` after it)."""
    return "pb_" + secrets.token_hex(10)


class ChunkState(models.TextChoices):
    INTENT = "intent"  # stored; create not answered yet (after a crash: adopt, never create twice)
    SUBMITTED = "submitted"  # the provider has it (remote_id known): polled
    CANCELING = "canceling"  # cancel asked (deadline guard or the gateway batch's cancel)
    DONE = "done"  # results applied; the rest handed back to real time or ended
    AMBIGUOUS = "ambiguous"  # adoption found several candidates: left for an operator, loudly


OPEN_STATES = (ChunkState.INTENT, ChunkState.SUBMITTED, ChunkState.CANCELING)


class ProviderBatch(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_chunk_id, editable=False)
    batch = models.ForeignKey("batches.Batch", on_delete=models.CASCADE, related_name="provider_batches")
    provider = models.CharField(max_length=64)
    kind = models.CharField(max_length=32)
    state = models.CharField(max_length=16, choices=ChunkState.choices, default=ChunkState.INTENT)
    # the gateway's item ids in line order: line n has custom id "<id>-<n>"
    item_ids = models.JSONField(default=list)
    line_count = models.PositiveIntegerField(default=0)
    input_bytes = models.PositiveBigIntegerField(default=0)
    # the estimated input tokens of its lines, held against the provider's batch_max_enqueued_tokens
    # while the chunk is open (provider_batches.grouping)
    enqueued_tokens = models.PositiveBigIntegerField(default=0)
    create_attempts = models.PositiveSmallIntegerField(default=0)
    remote_id = models.CharField(max_length=200, blank=True, default="")
    remote_state = models.CharField(max_length=16, blank=True, default="")  # batch_api.types.STATES
    succeeded_count = models.PositiveIntegerField(default=0)
    errored_count = models.PositiveIntegerField(default=0)
    canceled_count = models.PositiveIntegerField(default=0)
    expired_count = models.PositiveIntegerField(default=0)
    applied_count = models.PositiveIntegerField(default=0)  # results written through the result writer
    realtime_count = models.PositiveIntegerField(default=0)  # items handed back to real time
    http_calls = models.PositiveIntegerField(default=0)  # batch-API calls made for this chunk
    polls = models.PositiveIntegerField(default=0)
    # why a cancel was asked: "deadline" (the guard) or "cancelled" (the gateway batch's cancel)
    cancel_reason = models.CharField(max_length=16, blank=True, default="")
    # the team's budget reserved at create (the discounted estimate) and its ledger keys; given back
    # when the chunk is done (the result writer charged the reported usage)
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    reserved_keys = models.JSONField(default=list, blank=True)
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)  # the intent's time
    submitted_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)  # the provider's own window end
    due_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "created_at"]
        indexes = [
            models.Index(
                fields=["due_at"], name="providerbatch_due", condition=models.Q(due_at__isnull=False)
            ),
            models.Index(fields=["batch", "created_at"], name="providerbatch_batch"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.provider} {self.state})"

    @property
    def owner(self) -> str:
        """The claim owner of this chunk's items (batches.execution claims and the result writer)."""
        return f"pb:{self.id}"

    def line_id(self, n: int) -> str:
        return f"{self.id}-{n}"

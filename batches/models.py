"""Batches, their items, and per-team daily token usage (Team and ApiKey: teams.models)."""

from __future__ import annotations

import uuid

from django.db import models

from gateway_engine.endpoints import ENDPOINTS
from gateway_engine.error_kinds import ERROR_KINDS, ERROR_TYPES
from teams.models import ApiKey, Team

ENDPOINT_CHOICES = [(e, e) for e in ENDPOINTS if e != "messages"]  # /v1/messages is interactive only
USAGE_ENDPOINT_CHOICES = [(e, e) for e in ENDPOINTS]  # usage counts the interactive lane's calls too


class BatchStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_BATCH_STATUSES = (
    BatchStatus.COMPLETED,
    BatchStatus.FAILED,
    BatchStatus.CANCELLED,
    BatchStatus.EXPIRED,
)


class BatchPriority(models.TextChoices):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class ProviderBatchMode(models.TextChoices):
    AUTO = "auto"
    NEVER = "never"
    ALWAYS = "always"


class ServedVia(models.TextChoices):
    """The path an item takes: the real-time dispatcher ("") or its provider's batch API. Claims for
    real time take only REALTIME items (batches.execution.claims); the provider-batch route
    (provider_batches) sets an item back to REALTIME when real time must finish it."""

    REALTIME = "", "realtime"
    PROVIDER_BATCH = "provider_batch", "provider batch"


# The lanes' service order is batches.scheduling.fair.LANE_RANK (high 0 first), the one priority rank.


class Batch(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="batches")
    api_key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    status = models.CharField(max_length=16, choices=BatchStatus.choices, default=BatchStatus.QUEUED)
    metadata = models.JSONField(default=dict, blank=True)
    total_count = models.PositiveIntegerField(default=0)
    completed_count = models.PositiveIntegerField(default=0)
    failed_count = models.PositiveIntegerField(default=0)
    cancelled_count = models.PositiveIntegerField(default=0)
    expired_count = models.PositiveIntegerField(default=0)
    priority = models.CharField(max_length=8, choices=BatchPriority.choices, default=BatchPriority.NORMAL)
    completion_window = models.CharField(
        max_length=16,
        blank=True,
        default="",
        help_text="Deadline as given, e.g. '15m', '24h'; counted from created_at.",
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    # Where the batch's end is POSTed as a signed event (webhooks app; "" = the team's default, if any).
    # Checked at submission by batches.submission.webhook_url.
    webhook_url = models.CharField(max_length=2048, blank=True, default="")
    # The response cache for this batch (docs/contract.md §4, docs/cache.md): True caches every item,
    # False none, None (not given) leaves it to the route's `cache` setting.
    cache = models.BooleanField(null=True, blank=True, default=None)
    # whether items may go through their provider's own batch API (docs/provider_batches.md)
    provider_batch = models.CharField(
        max_length=8, choices=ProviderBatchMode.choices, default=ProviderBatchMode.AUTO
    )
    # HTTP calls made to providers' batch APIs for this batch (uploads, creates, polls, downloads): the
    # stats' ``batch_api_calls``, apart from ``request_count`` (which counts its lines)
    batch_api_calls = models.PositiveIntegerField(default=0)
    # The pipeline (docs/contract.md §4 "steps"): every item runs through these steps in order, as
    # checked at submission (batches.steps.Step.as_dict each); [] = one request per item.
    steps = models.JSONField(default=list, blank=True, db_default=[])
    # An evaluation (docs/contract.md §4 "targets"): every item was fanned out at submission to each of
    # these route or provider names (batches.submission.fanout); [] = one target per item, its own.
    targets = models.JSONField(default=list, blank=True, db_default=[])
    # Idempotency-Key of the creating POST (per team) and a digest of its body: a repeat with the same
    # key and body returns this batch; another body with the same key is a 409.
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    request_hash = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # Per-provider stats shaped as docs/contract.md §4 "stats"; written once when the batch is finalized
    # (and as progress snapshots while it runs).
    stats = models.JSONField(default=dict, blank=True)

    class Meta:
        permissions = [
            ("view_content", "Can read the prompts and answers of any team's batches"),
            ("retry_batch", "Can retry a batch's failed items (spends that team's budget)"),
            ("cancel_batch", "Can cancel any team's batch"),
        ]
        ordering = ["-created_at"]
        verbose_name_plural = "batches"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "idempotency_key"],
                name="batch_unique_idempotency_key",
                condition=~models.Q(idempotency_key=""),
            ),
        ]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="batch_team_created"),
            models.Index(fields=["status", "-created_at"], name="batch_status_created"),
            models.Index(fields=["-created_at"], name="batch_created"),
            # batches by their end: the webhooks app's sweep for ends without an event, retention
            models.Index(
                fields=["completed_at"],
                name="batch_completed",
                condition=models.Q(completed_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_BATCH_STATUSES


class ItemStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_ITEM_STATUSES = (ItemStatus.SUCCEEDED, ItemStatus.FAILED, ItemStatus.CANCELLED, ItemStatus.EXPIRED)


# The error types are defined once, by the engine: the field's choices are the rows of its error-kind
# table (gateway_engine/error_kinds.py) an item can end with, in its order, labelled the way TextChoices
# labels a member ("client_error" → "Client Error"). A new row changes them: a migration follows.
ERROR_TYPE_CHOICES: list[tuple[str, str]] = [(name, ERROR_KINDS[name].label) for name in ERROR_TYPES]
ERROR_TYPE_VALUES: tuple[str, ...] = tuple(value for value, _label in ERROR_TYPE_CHOICES)


class BatchItem(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    seq = models.PositiveIntegerField(help_text="Position in the submitted batch (0-based).")
    custom_id = models.CharField(max_length=255)
    route = models.CharField(max_length=64, blank=True, default="")
    requested_provider = models.CharField(max_length=64, blank=True, default="")
    # The scheduler's queue: the provider the item is expected to go to first (routing at submission;
    # the engine may still fall back elsewhere). "" = no routable provider.
    queue_provider = models.CharField(max_length=64, blank=True, default="")
    # A capacity move (batches.execution.capacity): the held-back provider whose queue the item was
    # claimed from by a same-priority peer (now its queue_provider, sent there first). "" = not moved.
    moved_from = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The item's prompt-prefix group (batches.scheduling.prefix.prefix_key, at submission): items of one
    # key are sent back to back for the providers' prompt caches. "" = nothing worth sharing.
    prefix_key = models.CharField(max_length=32, blank=True, default="")
    # {"messages": [...], "params": {...}} – normalized at submission (query → one user message).
    payload = models.JSONField()
    endpoint = models.CharField(
        max_length=16, choices=ENDPOINT_CHOICES, default="chat", db_default="chat",
        help_text="The surface the item came in on (gateway_engine.endpoints): chat, embeddings, responses.",
    )  # fmt: skip
    status = models.CharField(max_length=16, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    served_via = models.CharField(
        max_length=16, choices=ServedVia.choices, blank=True, default=ServedVia.REALTIME
    )
    provider = models.CharField(
        max_length=64, blank=True, default="", help_text="Provider that answered last."
    )
    attempts = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    error_type = models.CharField(max_length=32, choices=ERROR_TYPE_CHOICES, blank=True, default="")
    error_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error_message = models.TextField(blank=True, default="")
    prompt_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    total_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # Of prompt_tokens (which is ALL input): read from / written to the provider's prompt cache, as the
    # provider reported them (null: not reported). Priced apart (providers.pricing).
    cached_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cache_write_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # The provider's own answer when ``response`` is its OpenAI translation (kinds other than openai);
    # null for kind openai. Shown only on request (results API ``?include=native``), never in /v1 files.
    native_response = models.JSONField(null=True, blank=True)
    retry_extra_tokens = models.PositiveBigIntegerField(default=0)
    # What served the result (batches.execution.served.ServedBy): realtime, provider_batch or cache (the
    # response cache or an identical item's answer, issue #25: then attempts 0 and no billed tokens).
    served_by = models.CharField(max_length=16, default="realtime", db_default="realtime")
    # Per-attempt log: [{"provider", "status_code", "error_type", "latency_ms", "tokens", "at"}]
    attempt_log = models.JSONField(default=list, blank=True)
    # What the item's earlier claims spent when it was given back while waiting out a breaker or a
    # backoff (gateway_engine.items.RetryState: {"tried": {provider: attempts}, "breaker_waited": s}),
    # read by its next claim so max_retries and the breaker-wait limit hold across claims. null = none.
    retry_state = models.JSONField(null=True, blank=True)
    # A pipeline item (its batch has ``steps``): the step it is at (0-based; the row's route, payload and
    # result columns are that step's) and its record (batches.steps: the item's own input, target and
    # params, and each finished earlier step's outcome). null / 0 for an item of a batch without steps.
    step_index = models.PositiveSmallIntegerField(default=0, db_default=0)
    pipeline = models.JSONField(null=True, blank=True)
    # An evaluation's copy (its batch has ``targets``): the route or provider name this copy is sent to;
    # its ``custom_id`` is then the item's own with "@<target>" appended (unique in the batch, the key the
    # engine and the journal use), and its RESULT shows the item's own with ``target``. "" otherwise.
    target = models.CharField(max_length=64, blank=True, default="", db_default="")
    # Claim lease: a worker owns a running item until claim_expires_at; a dead worker's items are
    # claimed again after that.
    claimed_by = models.CharField(max_length=100, blank=True, default="")
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "custom_id"], name="batchitem_unique_custom_id"),
            models.UniqueConstraint(fields=["batch", "seq"], name="batchitem_unique_seq"),
        ]
        indexes = [
            models.Index(fields=["batch", "status"], name="batchitem_batch_status"),
            # the dispatcher's per-provider queues: EXISTS / claim by (batch, queue_provider) in seq order
            models.Index(
                fields=["batch", "queue_provider", "seq"],
                name="batchitem_queue",
                condition=models.Q(status="pending"),
            ),
            # prefix grouping: a team's pending items of one prefix key, in seq order (claims.claim_queued)
            models.Index(
                fields=["batch", "queue_provider", "prefix_key", "seq"],
                name="batchitem_queue_prefix",
                condition=models.Q(status="pending") & ~models.Q(prefix_key=""),
            ),
            models.Index(
                fields=["-finished_at"],
                name="batchitem_failed_recent",
                condition=models.Q(status="failed"),
            ),
            models.Index(fields=["provider", "error_type"], name="batchitem_provider_error"),
            # the providers dashboard: recent items per provider (error rate, latency)
            models.Index(fields=["provider", "-finished_at"], name="batchitem_provider_finished"),
            # the reaper's scan for claims of dead workers
            models.Index(
                fields=["claim_expires_at"],
                name="batchitem_running_claims",
                condition=models.Q(status="running"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.batch_id}:{self.custom_id}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_ITEM_STATUSES


class TeamUsageDaily(models.Model):
    """Tokens per team per provider per endpoint per day: the audit pages read only this table."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usage")
    provider = models.CharField(max_length=64)
    # the surface the tokens went to (gateway_engine.endpoints; /v1/messages calls are interactive only)
    endpoint = models.CharField(
        max_length=16, choices=USAGE_ENDPOINT_CHOICES, default="chat", db_default="chat",
        help_text="The surface the tokens went to: chat, embeddings, responses, messages.",
    )  # fmt: skip
    day = models.DateField()
    requests = models.PositiveBigIntegerField(default=0, help_text="HTTP attempts sent.")
    items_succeeded = models.PositiveBigIntegerField(default=0)
    items_failed = models.PositiveBigIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    wasted_tokens = models.PositiveBigIntegerField(
        default=0, help_text="Tokens billed for attempts whose answer was not used."
    )
    # db_default too: rows are upserted in raw SQL (batches.execution.finalize), and a process still on
    # the previous release inserts without these columns while a rolling deploy runs
    cached_tokens = models.PositiveBigIntegerField(
        default=0, db_default=0, help_text="Of prompt_tokens: read from the provider's prompt cache."
    )
    cache_write_tokens = models.PositiveBigIntegerField(
        default=0, db_default=0, help_text="Of prompt_tokens: written to the provider's prompt cache."
    )
    # the provider-batch split (docs/provider_batches.md): the rest of prompt/completion is real time
    provider_batch_prompt_tokens = models.PositiveBigIntegerField(
        default=0, db_default=0, help_text="Of prompt_tokens: served through the provider's batch API."
    )
    provider_batch_completion_tokens = models.PositiveBigIntegerField(
        default=0, db_default=0, help_text="Of completion_tokens: served through the provider's batch API."
    )

    class Meta:
        ordering = ["-day", "team", "provider", "endpoint"]
        verbose_name_plural = "team usage (daily)"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "provider", "endpoint", "day"], name="teamusage_unique_endpoint_day"
            ),
        ]
        indexes = [models.Index(fields=["day", "team"], name="teamusage_day_team")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.provider} {self.endpoint} {self.day}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

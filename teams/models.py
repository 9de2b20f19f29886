"""Teams and their API keys: the rows everything else hangs off (fair-share weight, token budgets,
share cap, RPM / TPM, queued-work and file limits; resolved with their defaults by teams/limits.py). The tables keep their old names (``batches_team``,
``batches_apikey``): the models moved here from ``batches`` without touching the data (migrations
batches 0009 / teams 0001-0002)."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

MAX_TEAM_WEIGHT = 1000


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    # Fair share: with several teams backlogged on one provider, each gets a share of that provider's
    # rate in proportion to its weight.
    weight = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TEAM_WEIGHT)],
        help_text="Share of a busy provider's rate relative to other teams (default 1).",
    )
    daily_token_budget = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Tokens per UTC day; empty = unlimited."
    )
    monthly_token_budget = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Tokens per UTC month; empty = unlimited."
    )
    max_provider_share = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.01), MaxValueValidator(1.0)],
        help_text="Hard cap on this team's share of any provider's RPM (0.01–1); empty = no cap.",
    )
    # RPM / TPM across all providers (gateway_engine/quota/team_quota.py), granted in the same atomic step
    # as the provider's buckets: empty = unlimited. Live, like the budgets.
    rpm_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Requests per minute across all providers; empty = unlimited.",
    )
    tpm_limit = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Tokens per minute across all providers (estimated at the grant, settled to the "
        "provider's usage); empty = unlimited.",
    )
    # Queued-work limits (batches/submission/queue_limits.py): empty = the deployment's default setting.
    max_pending_items = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Items not yet finished across this team's batches; empty = GATEWAY_TEAM_MAX_PENDING_ITEMS.",
    )
    max_open_batches = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Unfinished batches at once; empty = GATEWAY_TEAM_MAX_OPEN_BATCHES.",
    )
    max_submissions_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Batches submitted per minute; empty = GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE.",
    )
    # /v1/files quotas (openai_api.services.upload_file): empty = the deployment's default setting.
    max_stored_files = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="/v1 files (uploads and batch output) held at once; empty = GATEWAY_FILES_MAX_PER_TEAM.",
    )
    max_stored_file_bytes = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Bytes of /v1 files this team may hold; empty = GATEWAY_FILES_MAX_BYTES_PER_TEAM.",
    )
    # the interactive lane's request log (interactive.models.InteractiveCall) keeps metadata of every
    # call; the prompts and answers only when the team opts in (covered by retention)
    log_interactive_content = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Keep the prompts and answers of /v1/chat/completions calls in the request log.",
    )
    # the interactive lane's queue (gateway_engine/quota/fair_gate.py): calls of this team waiting for
    # quota at once in one web process; one more gets 429 team_waiting_limit
    max_waiting_calls = models.PositiveIntegerField(
        default=1000,
        db_default=1000,
        validators=[MinValueValidator(1)],
        help_text="/v1/chat/completions calls of this team that may wait for quota at once per web process "
        "(default 1000); one more is answered 429 team_waiting_limit.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "batches_team"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(weight__gte=1), name="team_weight_positive"),
        ]

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """A bearer key. Only a SHA-256 digest and a short visible prefix are stored."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(
        max_length=100, blank=True, default="", help_text="What the key is for (create_api_key --name)."
    )
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "batches_apikey"
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        label = f" ({self.name})" if self.name else ""
        return f"{self.prefix}…{label}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

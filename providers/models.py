"""Providers (one upstream model endpoint each, with its own quota) and routing rules."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, URLValidator
from django.db import models

from gateway_engine.provider_file import (
    KIND_CHECKED_FIELDS,
    PROVIDER_FIELDS,
    PROVIDER_KINDS,
    ROUTE_FIELDS,
    BatchLimits,
    FieldSpec,
    batch_limits,
    kind_problems,
)

from .kind_rules import KIND_CONSTRAINTS
from .secrets import SealedKeyField

# Defaults and bounds come from the provider file's one table (gateway_engine.provider_file): sane upper
# bounds, large enough for any real account tier, small enough to catch a typo.
_P, _R = PROVIDER_FIELDS, ROUTE_FIELDS
BATCH_FIELDS = tuple(name for name in PROVIDER_FIELDS if name.startswith("batch_"))


def _bounds(spec: FieldSpec) -> list:
    """Validators for a field's bounds in the table (a minimum of 0 is a positive field's own)."""
    out = [MinValueValidator(spec.minimum)] if spec.minimum else []
    return out + ([MaxValueValidator(spec.maximum)] if spec.maximum is not None else [])


http_url_validator = URLValidator(schemes=["http", "https"])

KIND_CHOICES = [(kind, kind) for kind in PROVIDER_KINDS]

# what the gateway calls under base_url, per kind (docs/contract.md §5; the admin shows it as help text)
BASE_URL_HELP = (
    "openai: OpenAI-compatible base URL, the gateway POSTs to {base_url}/chat/completions. "
    "azure_openai: the resource URL (https://NAME.openai.azure.com); the gateway POSTs to "
    "{base_url}/openai/deployments/{deployment}/chat/completions?api-version={api_version}. "
    "anthropic: e.g. https://api.anthropic.com/v1; the gateway POSTs to {base_url}/messages. "
    "bedrock: the runtime endpoint, https://bedrock-runtime.REGION.amazonaws.com; the gateway POSTs to "
    "{base_url}/model/{model}/converse, SigV4-signed. "
    "gemini: ends with the API version, e.g. https://generativelanguage.googleapis.com/v1beta; the "
    "gateway POSTs to {base_url}/models/{model}:generateContent."
)


def _price_field(what: str) -> models.DecimalField:
    return models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True, help_text=what)


def secret_env_name(provider_name: str) -> str:
    """GATEWAY_PROVIDER_SECRET_<NAME>: upper-cased, non-alphanumerics as underscores."""
    return "GATEWAY_PROVIDER_SECRET_" + re.sub(r"[^A-Z0-9]", "_", provider_name.upper())


def url_origin(url: str) -> str:
    """scheme://host:port of a URL, lower-cased, with the scheme's default port made explicit."""
    parts = urlsplit((url or "").strip())
    scheme = (parts.scheme or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    port = port or {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


class ProviderBatchSettings(models.Model):
    """The provider's own batch API (docs/provider_batches.md): its fields, kept apart from the rest of
    ``Provider`` (an abstract model: the columns are Provider's). None = the kind's default
    (gateway_engine.provider_file.batch_limits)."""

    batch_api = models.BooleanField(
        default=_P["batch_api"].default,
        help_text="Deadline-tolerant items may go through the provider's own batch API (kinds openai, "
        "azure_openai, anthropic; refused on gemini).",
    )
    batch_deployment = models.CharField(
        max_length=200,
        blank=True,
        default=_P["batch_deployment"].default,
        help_text="azure_openai with batch_api (required there): the Global-Batch deployment each line names.",
    )
    batch_price_factor = models.FloatField(
        default=_P["batch_price_factor"].default,
        validators=_bounds(_P["batch_price_factor"]),
        help_text="Price of provider-batch work relative to real time (0.5 = half).",
    )
    batch_turnaround_seconds = models.PositiveIntegerField(
        default=_P["batch_turnaround_seconds"].default,
        validators=_bounds(_P["batch_turnaround_seconds"]),
        help_text="How long the provider may take to end a batch (its window; 86400 = 24h).",
    )
    batch_min_window_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=_bounds(_P["batch_min_window_seconds"]),
        help_text="auto: a batch goes to the batch API only with a completion_window at least this long "
        "(empty = the turnaround).",
    )
    batch_max_requests = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=_bounds(_P["batch_max_requests"]),
        help_text="Lines per provider batch (empty = the kind's limit: 50,000 OpenAI/Azure, 100,000 Anthropic).",
    )
    batch_max_bytes = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=_bounds(_P["batch_max_bytes"]),
        help_text="Bytes per provider batch input (empty = the kind's limit: 200 MB OpenAI/Azure, 256 MB Anthropic).",
    )
    batch_max_enqueued_tokens = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=_bounds(_P["batch_max_enqueued_tokens"]),
        help_text="Prompt tokens the provider lets one account hold enqueued (empty = not limited here).",
    )

    class Meta:
        abstract = True

    @property
    def batch_limits(self) -> BatchLimits:
        """The batch-API settings with the kind's defaults filled in."""
        return batch_limits(self.kind, {name: getattr(self, name) for name in BATCH_FIELDS})


class Provider(ProviderBatchSettings):
    name = models.SlugField(
        max_length=64, unique=True, help_text="Stable identifier, used in routes and stats."
    )
    base_url = models.CharField(
        max_length=500,
        validators=[http_url_validator],
        help_text=BASE_URL_HELP,
    )
    model = models.CharField(max_length=200, help_text="Model name sent in every request.")
    kind = models.CharField(
        max_length=32,
        choices=KIND_CHOICES,
        default=_P["kind"].default,
        help_text="The provider's API (wire format): what is sent, how answers, usage and errors are read.",
    )
    deployment = models.CharField(
        max_length=200,
        blank=True,
        default=_P["deployment"].default,
        help_text="azure_openai only: the deployment named in the URL (empty = the model name).",
    )
    api_version = models.CharField(
        max_length=64,
        blank=True,
        default=_P["api_version"].default,
        help_text="azure_openai only (required there): the api-version query parameter, e.g. 2024-10-21.",
    )
    region = models.CharField(
        max_length=32,
        blank=True,
        default=_P["region"].default,
        help_text="bedrock only (required there): the AWS region requests are signed for, e.g. us-east-1.",
    )
    aws_access_key_id = models.CharField(
        max_length=128,
        blank=True,
        default=_P["aws_access_key_id"].default,
        help_text="bedrock only (required there): the access key id; its secret access key is the API key.",
    )
    # Write-only: never rendered back (admin uses a password widget, the API never serializes it); stored
    # sealed (providers.secrets: Fernet with GATEWAY_SECRET_KEYS), read through providers.adapters only.
    api_key = SealedKeyField(max_length=2000, blank=True, default=_P["api_key"].default)
    rpm = models.PositiveIntegerField(
        "RPM",
        validators=_bounds(_P["rpm"]),
        help_text="Requests per minute.",
    )
    tpm = models.PositiveIntegerField(
        "TPM",
        validators=_bounds(_P["tpm"]),
        help_text="Tokens per minute.",
    )
    itpm = models.PositiveIntegerField(
        "ITPM",
        null=True,
        blank=True,
        validators=_bounds(_P["itpm"]),
        help_text="Input tokens per minute, enforced beside RPM and TPM (empty = not limited apart).",
    )
    otpm = models.PositiveIntegerField(
        "OTPM",
        null=True,
        blank=True,
        validators=_bounds(_P["otpm"]),
        help_text="Output tokens per minute, enforced beside RPM and TPM (empty = not limited apart).",
    )
    max_concurrency = models.PositiveIntegerField(
        validators=_bounds(_P["max_concurrency"]),
        help_text="Requests in flight at once, across all workers.",
    )
    burst_seconds = models.FloatField(
        default=_P["burst_seconds"].default,
        validators=_bounds(_P["burst_seconds"]),
        help_text="Bucket capacity = rate × burst_seconds.",
    )
    timeout_seconds = models.FloatField(
        default=_P["timeout_seconds"].default,
        validators=_bounds(_P["timeout_seconds"]),
    )
    max_retries = models.PositiveSmallIntegerField(
        default=_P["max_retries"].default, validators=_bounds(_P["max_retries"])
    )
    enabled = models.BooleanField(default=_P["enabled"].default)
    adaptive = models.BooleanField(
        default=_P["adaptive"].default,
        help_text="Shared keys: the buckets follow the remaining-quota headers the provider sends "
        "(x-ratelimit-remaining-*, anthropic-ratelimit-*), so traffic outside the gateway on the same key "
        "slows it down instead of causing 429s. No effect for kinds that send none (gemini).",
    )
    # scheme://host:port the provider's key was last confirmed for; a different base_url origin
    # disables the provider until a superuser confirms it (the key must not follow a typo or a staff edit).
    confirmed_origin = models.CharField(max_length=500, blank=True, default="", editable=False)
    price_prompt_per_million = _price_field("Price per million prompt tokens (empty = unknown).")
    price_completion_per_million = _price_field("Price per million completion tokens (empty = unknown).")
    price_cached_prompt_per_million = _price_field(
        "Price per million cached (cache-read) prompt tokens (empty = the prompt price)."
    )
    price_cache_write_per_million = _price_field(
        "Price per million prompt tokens written to the provider's cache (empty = the prompt price)."
    )
    # embeddings bill input tokens only, at their own price (providers.pricing.Prices.for_endpoint)
    price_embedding_per_million = _price_field(
        "Price per million input tokens of embedding requests (empty = the prompt price)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(rpm__gte=1), name="provider_rpm_positive"),
            models.CheckConstraint(condition=models.Q(tpm__gte=1), name="provider_tpm_positive"),
            models.CheckConstraint(
                condition=models.Q(max_concurrency__gte=1), name="provider_concurrency_positive"
            ),
            models.CheckConstraint(condition=models.Q(burst_seconds__gte=1), name="provider_burst_min_1s"),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gt=0), name="provider_timeout_positive"
            ),
            models.CheckConstraint(condition=models.Q(kind__in=PROVIDER_KINDS), name="provider_kind_known"),
            models.CheckConstraint(
                condition=models.Q(itpm__isnull=True) | models.Q(itpm__gte=1), name="provider_itpm_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(otpm__isnull=True) | models.Q(otpm__gte=1), name="provider_otpm_positive"
            ),
            # what a kind requires (its descriptor in gateway_engine/kinds.py: required fields, a burst cap)
            *KIND_CONSTRAINTS,
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:  # never the key
        return f"<Provider {self.name!r} {self.base_url!r}>"

    def save(self, *args, **kwargs):
        """A new provider's origin is confirmed as created. A row from before confirmed_origin
        existed gets the origin it had in the database (so a change made now still needs a
        confirmation)."""
        if not self.confirmed_origin:
            previous = None
            if not self._state.adding and self.pk:
                previous = Provider.objects.filter(pk=self.pk).values_list("base_url", flat=True).first()
            self.confirmed_origin = url_origin(previous or self.base_url)
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "confirmed_origin"}
        super().save(*args, **kwargs)

    @property
    def secret_env_name(self) -> str:
        return secret_env_name(self.name)

    # ---- the key follows a confirmed origin only ------------------------------------------------
    @property
    def origin(self) -> str:
        return url_origin(self.base_url)

    @property
    def origin_confirmed(self) -> bool:
        """False after base_url moved to another scheme/host/port: the provider then counts as
        disabled (no call, no key sent) until a superuser confirms (admin, or load_providers
        --allow-origin-change)."""
        return not self.confirmed_origin or self.confirmed_origin == self.origin

    @property
    def usable(self) -> bool:
        return self.enabled and self.origin_confirmed

    def confirm_origin(self) -> None:
        self.confirmed_origin = self.origin

    def clean(self) -> None:
        super().clean()
        self._clean_kind()
        if self.name:
            env = secret_env_name(self.name)
            twins = [
                other
                for other in Provider.objects.exclude(pk=self.pk).values_list("name", flat=True)
                if secret_env_name(other) == env
            ]
            if twins:
                raise ValidationError(
                    {
                        "name": f"its secret variable {env} is the same as provider {twins[0]!r}'s; "
                        "choose a name that differs in letters or digits"
                    }
                )

    def _clean_kind(self) -> None:
        """The kind-specific checks of the provider file (gateway_engine.provider_file.kind_problems),
        each on its field. An unknown kind is left to the field's choices (it would be said twice)."""
        if self.kind not in PROVIDER_KINDS:
            return
        values = {name: getattr(self, name) for name in KIND_CHECKED_FIELDS}
        problems: dict[str, list[str]] = {}
        for name, message in kind_problems(values):
            problems.setdefault(name, []).append(message)
        if problems:
            raise ValidationError(problems)

    @property
    def api_key_source(self) -> str:
        """Where the key to send comes from: "environment" (GATEWAY_PROVIDER_SECRET_<NAME>, wins),
        "database" or "none". What the admin and the dashboard show instead of the key."""
        if os.environ.get(self.secret_env_name):
            return "environment"
        return "database" if self.api_key else "none"

    @property
    def has_api_key(self) -> bool:
        return self.api_key_source != "none"


class RoutingRule(models.Model):
    route = models.SlugField(max_length=64, help_text="Route tag used by items, e.g. 'intent'.")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="routes")
    priority = models.PositiveSmallIntegerField(
        default=_R["priority"].default,
        validators=_bounds(_R["priority"]),
        help_text="0 first; higher numbers are fallbacks.",
    )
    weight = models.PositiveIntegerField(
        default=_R["weight"].default,
        validators=_bounds(_R["weight"]),
        help_text="Traffic share among rules of equal priority.",
    )
    enabled = models.BooleanField(default=_R["enabled"].default)
    cache = models.BooleanField(
        default=_R["cache"].default,
        help_text="Answer this route's items at temperature 0 from the response cache (docs/cache.md); "
        "the route's cache is on when any of its enabled rules says so. A batch's own `cache` field wins.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["route", "priority", "provider__name"]
        constraints = [
            models.UniqueConstraint(fields=["route", "provider"], name="routingrule_unique_route_provider"),
            models.CheckConstraint(condition=models.Q(weight__gte=1), name="routingrule_weight_positive"),
        ]
        indexes = [models.Index(fields=["route", "enabled", "priority"], name="routingrule_lookup")]

    def __str__(self) -> str:
        return f"{self.route} → {self.provider.name} (p{self.priority}, w{self.weight})"


from .pause_record import ProviderPause  # noqa: E402  (the durable provider pause: one model per module)

__all__ = ["Provider", "ProviderBatchSettings", "ProviderPause", "RoutingRule"]

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from gateway_engine.kinds import KINDS
from gateway_site.admin_tools import BoundedNumbersMixin, NumberWidthsMixin, SecretLookupsRefusedMixin
from providers.adapters import provider_limits

from .models import BATCH_FIELDS, Provider, RoutingRule

# the fields only one kind reads (its descriptor in gateway_engine/kinds.py), one admin section per kind
KIND_SECTIONS = [
    (f"Kind {kind} only", {"fields": [f for f in d.only_fields if f not in BATCH_FIELDS]})
    for kind, d in sorted(KINDS.items())
    if any(f not in BATCH_FIELDS for f in d.only_fields)
]
KIND_FIELDS = [f for _, section in KIND_SECTIONS for f in section["fields"]]

# provider-batch fields a form post may omit (a script written before #23): the stored value stays
KEPT_WHEN_ABSENT = ("batch_price_factor", "batch_turnaround_seconds")


class ProviderForm(forms.ModelForm):
    """The API key is write-only: the widget never renders the stored value back."""

    api_key = forms.CharField(
        label="API key",
        required=False,
        max_length=1000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        # the admin renders help texts as HTML: <NAME> must be escaped or it vanishes as an unknown tag
        help_text="Write-only: stored encrypted, never shown again. Leave blank to keep the current key. "
        "GATEWAY_PROVIDER_SECRET_&lt;NAME&gt; in the environment takes precedence "
        "(name upper-cased, other characters → _).",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored API key", required=False)

    class Meta:
        model = Provider
        fields = [
            "name",
            "kind",
            "base_url",
            "model",
            *KIND_FIELDS,
            "api_key",
            "clear_api_key",
            "rpm",
            "tpm",
            "itpm",
            "otpm",
            "max_concurrency",
            "burst_seconds",
            "timeout_seconds",
            "max_retries",
            "enabled",
            "adaptive",
            "price_prompt_per_million",
            "price_completion_per_million",
            "price_cached_prompt_per_million",
            "price_cache_write_per_million",
            "price_embedding_per_million",
            *BATCH_FIELDS,
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # a post without the field (a script written before #21) keeps the provider's kind, not an error
        self.fields["kind"].required = False
        # likewise the provider-batch numbers (#23): absent = the stored value
        for name in KEPT_WHEN_ABSENT:
            self.fields[name].required = False

    def _kept(self, name: str):
        value = self.cleaned_data.get(name)
        if value is None:
            return getattr(self.instance, name)
        return value

    def clean_batch_price_factor(self):
        return self._kept("batch_price_factor")

    def clean_batch_turnaround_seconds(self):
        return self._kept("batch_turnaround_seconds")

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or self.instance.kind or Provider._meta.get_field("kind").default

    def clean_api_key(self) -> str:
        value = self.cleaned_data.get("api_key", "")
        if not value:
            return self.instance.api_key if self.instance.pk else ""
        return value.strip()

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("clear_api_key"):
            cleaned["api_key"] = ""
            self.instance.api_key = ""
        return cleaned


class RoutingRuleInline(NumberWidthsMixin, BoundedNumbersMixin, admin.TabularInline):
    model = RoutingRule
    extra = 1
    fields = ["route", "priority", "weight", "enabled", "cache"]
    ordering = ["route", "priority"]


@admin.register(Provider)
class ProviderAdmin(SecretLookupsRefusedMixin, NumberWidthsMixin, BoundedNumbersMixin, admin.ModelAdmin):
    form = ProviderForm
    # Fits 1280 px: burst, timeout and retries are on the change page (and on /dashboard/providers/).
    list_display = [
        "name",
        "model_and_url",
        "rpm",
        "tpm",
        "max_concurrency",
        "enabled",
        "key_configured",
        "origin_ok",
    ]
    actions = ["confirm_origin", "clear_pause", "clear_provider_pause"]
    list_editable = ["rpm", "tpm", "max_concurrency", "enabled"]
    list_filter = ["enabled", "kind"]
    search_fields = ["name", "model", "base_url"]
    inlines = [RoutingRuleInline]
    readonly_fields = ["key_source", "origin_status", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "kind", "base_url", "origin_status", "model", "enabled"]}),
        *KIND_SECTIONS,
        ("Credentials", {"fields": ["api_key", "clear_api_key", "key_source"]}),
        ("Quota", {"fields": ["rpm", "tpm", "itpm", "otpm", "max_concurrency", "burst_seconds", "adaptive"]}),
        ("Calls", {"fields": ["timeout_seconds", "max_retries"]}),
        (
            "Provider batch API (docs/provider_batches.md; not on gemini or bedrock)",
            {"fields": list(BATCH_FIELDS)},
        ),
        (
            "Prices",
            {
                "fields": [
                    "price_prompt_per_million",
                    "price_completion_per_million",
                    "price_cached_prompt_per_million",
                    "price_cache_write_per_million",
                    "price_embedding_per_million",
                ]
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description="kind · model / base URL", ordering="model")
    def model_and_url(self, obj: Provider):
        # the kind shares this column: one more column would not fit the changelist at 1280 px
        return format_html(
            '{}<br><span class="url column-kind">{}</span> <span class="url">{}</span>',
            obj.model,
            obj.kind,
            obj.base_url,
        )

    @admin.display(boolean=True, description="key")
    def key_configured(self, obj: Provider) -> bool:
        return obj.has_api_key

    @admin.display(boolean=True, description="origin ok")
    def origin_ok(self, obj: Provider) -> bool:
        return obj.origin_confirmed

    @admin.display(description="origin")
    def origin_status(self, obj: Provider) -> str:
        if not obj.pk:
            return "confirmed when created"
        if obj.origin_confirmed:
            return f"{obj.origin} (confirmed)"
        return (
            f"CHANGED from {obj.confirmed_origin} to {obj.origin}: the provider is disabled and its key is "
            "not sent until a superuser confirms the new origin (action 'Confirm the new URL origin')"
        )

    def save_model(self, request, obj: Provider, form, change) -> None:
        super().save_model(request, obj, form, change)
        if not obj.origin_confirmed:
            self.message_user(
                request,
                f"{obj.name}: base URL moved to another origin ({obj.origin}); the provider is disabled "
                "until a superuser confirms it.",
                messages.WARNING,
            )

    def has_confirm_origin_permission(self, request) -> bool:
        return request.user.is_superuser

    @admin.action(description="Confirm the new URL origin (superuser)", permissions=["confirm_origin"])
    def confirm_origin(self, request, queryset) -> None:
        confirmed = []
        for provider in queryset:
            if not provider.origin_confirmed:
                provider.confirm_origin()
                provider.save(update_fields=["confirmed_origin", "updated_at"])
                confirmed.append(f"{provider.name} → {provider.origin}")
        self.message_user(
            request,
            "confirmed: " + ", ".join(confirmed) if confirmed else "nothing to confirm",
            messages.INFO,
        )

    def has_clear_pause_permission(self, request) -> bool:
        return request.user.has_perm("providers.change_provider")

    @admin.action(description="Clear the rate-limit pause (429) now", permissions=["clear_pause"])
    def clear_pause(self, request, queryset) -> None:
        from gateway_engine.quota.types import QuotaStoreUnavailable
        from providers.limits.factory import clear_pause_sync

        try:
            for provider in queryset:
                clear_pause_sync(provider_limits(provider))
        except QuotaStoreUnavailable as exc:
            self.message_user(request, f"quota store unavailable: {exc}", messages.ERROR)
            return
        names = ", ".join(p.name for p in queryset)
        self.message_user(request, f"rate-limit pause cleared for {names}", messages.SUCCESS)

    def has_clear_provider_pause_permission(self, request) -> bool:
        return request.user.has_perm("providers.change_provider")

    @admin.action(
        description="Clear the provider pause (quota exhausted / per-day)",
        permissions=["clear_provider_pause"],
    )
    def clear_provider_pause(self, request, queryset) -> None:
        """Lift the engine's pause of each selected provider (its account was out of quota), recorded in
        the audit history; the 429 pause is the other action."""
        from gateway_engine.quota.types import QuotaStoreUnavailable
        from providers import pauses

        cleared, idle = [], []
        try:
            for provider in queryset:
                state = pauses.clear(provider.name)
                if state is None:
                    idle.append(provider.name)
                else:
                    cleared.append(f"{provider.name} ({pauses.describe(state)})")
        except QuotaStoreUnavailable as exc:
            self.message_user(request, f"quota store unavailable: {exc}", messages.ERROR)
            return
        if cleared:
            self.message_user(request, "provider pause cleared: " + "; ".join(cleared), messages.SUCCESS)
        if idle:
            self.message_user(request, "no provider pause to clear: " + ", ".join(idle), messages.INFO)

    @admin.display(description="key source")
    def key_source(self, obj: Provider) -> str:
        if not obj.pk:
            return "-"
        return {
            "environment": f"environment ({obj.secret_env_name})",
            "database": "database (hidden)",
            "none": f"none (set it here or in {obj.secret_env_name})",
        }[obj.api_key_source]


@admin.register(RoutingRule)
class RoutingRuleAdmin(SecretLookupsRefusedMixin, NumberWidthsMixin, BoundedNumbersMixin, admin.ModelAdmin):
    list_display = ["route", "provider", "priority", "weight", "enabled", "cache"]
    list_editable = ["priority", "weight", "enabled", "cache"]
    list_filter = ["route", "enabled", "provider"]
    search_fields = ["route", "provider__name"]
    list_select_related = ["provider"]

from django import forms
from django.contrib import admin
from django.utils.html import format_html

from gateway_site.admin_tools import BoundedNumbersMixin

from .models import Provider, RoutingRule


class ProviderForm(forms.ModelForm):
    """The API key is write-only: the widget never renders the stored value back."""

    api_key = forms.CharField(
        label="API key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        # the admin renders help texts as HTML: <NAME> must be escaped or it vanishes as an unknown tag
        help_text="Write-only. Leave blank to keep the current key. "
        "GATEWAY_PROVIDER_SECRET_&lt;NAME&gt; in the environment takes precedence "
        "(name upper-cased, other characters → _).",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored API key", required=False)

    class Meta:
        model = Provider
        fields = [
            "name",
            "base_url",
            "model",
            "api_key",
            "clear_api_key",
            "rpm",
            "tpm",
            "max_concurrency",
            "burst_seconds",
            "timeout_seconds",
            "max_retries",
            "enabled",
        ]

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


class RoutingRuleInline(BoundedNumbersMixin, admin.TabularInline):
    model = RoutingRule
    extra = 1
    fields = ["route", "priority", "weight", "enabled"]
    ordering = ["route", "priority"]


@admin.register(Provider)
class ProviderAdmin(BoundedNumbersMixin, admin.ModelAdmin):
    form = ProviderForm
    # Fits 1280 px: burst, timeout and retries are on the change page (and on /dashboard/providers/).
    list_display = ["name", "model_and_url", "rpm", "tpm", "max_concurrency", "enabled", "key_configured"]
    list_editable = ["rpm", "tpm", "max_concurrency", "enabled"]
    list_filter = ["enabled"]
    search_fields = ["name", "model", "base_url"]
    inlines = [RoutingRuleInline]
    readonly_fields = ["key_source", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "base_url", "model", "enabled"]}),
        ("Credentials", {"fields": ["api_key", "clear_api_key", "key_source"]}),
        ("Quota", {"fields": ["rpm", "tpm", "max_concurrency", "burst_seconds"]}),
        ("Calls", {"fields": ["timeout_seconds", "max_retries"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description="model / base URL", ordering="model")
    def model_and_url(self, obj: Provider):
        return format_html('{}<br><span class="url">{}</span>', obj.model, obj.base_url)

    @admin.display(boolean=True, description="key")
    def key_configured(self, obj: Provider) -> bool:
        return obj.has_api_key

    @admin.display(description="key source")
    def key_source(self, obj: Provider) -> str:
        import os

        if obj.pk and os.environ.get(obj.secret_env_name):
            return f"environment ({obj.secret_env_name})"
        if obj.pk and obj.api_key:
            return "database (hidden)"
        return f"none (set it here or in {obj.secret_env_name})" if obj.pk else "-"


@admin.register(RoutingRule)
class RoutingRuleAdmin(BoundedNumbersMixin, admin.ModelAdmin):
    list_display = ["route", "provider", "priority", "weight", "enabled"]
    list_editable = ["priority", "weight", "enabled"]
    list_filter = ["route", "enabled", "provider"]
    search_fields = ["route", "provider__name"]
    list_select_related = ["provider"]

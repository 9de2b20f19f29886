"""Admin: a team's default URL and secret (rotate action), the events with their delivery log
(redeliver action)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from batches.submission import webhook_url

from . import services, signing
from .models import DeliveryAttempt, TeamWebhook, WebhookEvent


class TeamWebhookForm(forms.ModelForm):
    class Meta:
        model = TeamWebhook
        fields = ["team", "url"]

    def clean_url(self) -> str:
        try:
            return services.check_url(self.cleaned_data.get("url") or "")
        except webhook_url.WebhookUrlError as exc:
            raise forms.ValidationError(f"webhook_url {exc}") from None


@admin.register(TeamWebhook)
class TeamWebhookAdmin(admin.ModelAdmin):
    form = TeamWebhookForm
    list_display = ("team", "url", "rotated_at", "updated_at")
    readonly_fields = ("secret", "previous_secret", "rotated_at", "created_at", "updated_at")
    actions = ["rotate_secret"]

    def save_model(self, request, obj, form, change):
        if not obj.secret:
            obj.secret = signing.new_secret()
        super().save_model(request, obj, form, change)

    @admin.action(description="Rotate the secret (the old one also signs for 24 h)")
    def rotate_secret(self, request, queryset):
        for hook in queryset:
            services.rotate_secret(hook.team_id)
        messages.success(request, f"Rotated {queryset.count()} secret(s).")


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "outcome", "status_code", "latency_ms", "address", "error",
              "response_excerpt")  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(WebhookEvent)
class WebhookEventAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "type",
        "batch",
        "team",
        "state",
        "attempts",
        "created_at",
        "delivered_at",
        "due_at",
    )
    list_filter = ("state", "type", "team")
    search_fields = ("id", "batch__id", "url")
    readonly_fields = ("id", "batch", "team", "type", "url", "body", "state", "attempts", "due_at", "give_up_at",
                       "created_at", "delivered_at", "last_error")  # fmt: skip
    inlines = [DeliveryAttemptInline]
    actions = ["redeliver"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Redeliver (same webhook-id, now)")
    def redeliver(self, request, queryset):
        n = services.redeliver([str(pk) for pk in queryset.values_list("pk", flat=True)])
        messages.success(request, f"{n} event(s) will be delivered again now.")

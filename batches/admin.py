from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from .keys import generate_raw_key, hash_key, visible_prefix
from .models import ApiKey, Batch, BatchItem, Team, TeamUsageDaily


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ["prefix", "name", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "name", "created_at", "last_used_at", "revoked_at"]
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    """Team limits are live: a save (here or in the list) reaches every worker on commit (docs/quota.md)."""

    list_display = [
        "name", "weight", "daily_token_budget", "monthly_token_budget", "max_provider_share", "created_at",
    ]  # fmt: skip
    list_editable = ["weight", "daily_token_budget", "monthly_token_budget", "max_provider_share"]
    search_fields = ["name"]
    readonly_fields = ["budget_usage", "created_at"]
    fieldsets = [
        (None, {"fields": ["name", "created_at"]}),
        (
            "Limits (live: applied by every worker within about a second of saving)",
            {
                "fields": [
                    "weight",
                    "daily_token_budget",
                    "monthly_token_budget",
                    "max_provider_share",
                    "budget_usage",
                ]  # fmt: skip
            },
        ),
    ]
    inlines = [ApiKeyInline]

    @admin.display(description="budget used (UTC day / month)")
    def budget_usage(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        from providers.quota import QuotaError

        from .budget import budget_usage

        try:
            usage = budget_usage(obj)
        except QuotaError as exc:
            return f"unavailable ({exc})"
        return "; ".join(
            f"{period}: {used:,} of {'unlimited' if limit is None else f'{limit:,}'} tokens"
            for period, limit, used in usage
        )


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "team", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["team", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "team__name"]
    list_select_related = ["team"]
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["team", "name"]
        return ["team", "name", "prefix", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        return ["team", "prefix", "created_at", "last_used_at"]

    def save_model(self, request, obj, form, change):
        if not change:
            raw = generate_raw_key()
            obj.prefix = visible_prefix(raw)
            obj.key_hash = hash_key(raw)
            super().save_model(request, obj, form, change)
            messages.warning(
                request,
                f"New API key for team {obj.team.name} (shown once, copy it now): {raw}",
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} key(s).")


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "team",
        "status",
        "total_count",
        "completed_count",
        "failed_count",
        "created_at",
        "completed_at",
        "items_link",
    ]
    list_filter = ["status", "team"]
    search_fields = ["id"]
    date_hierarchy = "created_at"
    list_select_related = ["team"]
    show_full_result_count = False
    exclude = ["api_key"]

    @admin.display(description="items")
    def items_link(self, obj: Batch):
        url = reverse("admin:batches_batchitem_changelist") + f"?batch__id__exact={obj.pk}"
        return format_html('<a href="{}">{} items</a>', url, obj.total_count)


@admin.register(BatchItem)
class BatchItemAdmin(ReadOnlyAdmin):
    list_display = ["custom_id", "batch", "seq", "status", "provider", "attempts", "latency_ms", "error_type"]
    list_filter = ["status", "error_type", "provider"]
    search_fields = ["custom_id"]
    show_full_result_count = False
    raw_id_fields = ["batch"]


@admin.register(TeamUsageDaily)
class TeamUsageDailyAdmin(ReadOnlyAdmin):
    list_display = [
        "day",
        "team",
        "provider",
        "requests",
        "prompt_tokens",
        "completion_tokens",
        "wasted_tokens",
        "items_succeeded",
        "items_failed",
    ]
    list_filter = ["team", "provider"]
    date_hierarchy = "day"
    list_select_related = ["team"]

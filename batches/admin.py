from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from gateway_site.admin_tools import BoundedNumbersMixin
from providers.admin import NumberWidthsMixin

from .keys import generate_raw_key, hash_key, visible_prefix
from .models import ApiKey, Batch, BatchItem, Team, TeamUsageDaily
from .services import revoke_api_key


def short_datetime(value) -> str:
    """'2026-11-30 12:05' (UTC) instead of 'Nov. 30, 2026, 12:05 p.m.': narrow columns fit at 1280 px."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M") if value else "-"


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
class TeamAdmin(NumberWidthsMixin, BoundedNumbersMixin, admin.ModelAdmin):
    """Team limits are live: a save (here or in the list) reaches every worker on commit (docs/quota.md)."""

    list_display = [
        "name", "weight", "daily_token_budget", "monthly_token_budget", "max_provider_share", "created_at",
    ]  # fmt: skip
    list_editable = ["weight", "daily_token_budget", "monthly_token_budget", "max_provider_share"]
    search_fields = ["name"]
    readonly_fields = ["budget_usage", "queue_usage", "created_at"]
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
        (
            "Queued-work and file limits (empty: the deployment's GATEWAY_TEAM_MAX_* / GATEWAY_FILES_MAX_* defaults)",
            {
                "fields": [
                    "max_pending_items",
                    "max_open_batches",
                    "max_submissions_per_minute",
                    "queue_usage",
                    "max_stored_files",
                    "max_stored_file_bytes",
                ]
            },
        ),
    ]
    inlines = [ApiKeyInline]

    @admin.display(description="queue now")
    def queue_usage(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        from .queue_limits import usage

        u = usage(obj)
        return (
            f"{u.pending_items:,} of {u.max_pending_items:,} pending items; {u.open_batches:,} of "
            f"{u.max_open_batches:,} open batches; {u.submissions_last_minute} of "
            f"{u.max_submissions_per_minute} submissions in the last minute"
        )

    @admin.display(description="budget used (UTC day / month)")
    def budget_usage(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        from gateway_engine.quota import QuotaError

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
    list_display = ["prefix", "name", "team", "created", "last_used", "revoked"]
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
            # kept on this request only: rendered once by response_add, never put in the messages
            # cookie or the session
            request._new_api_key = raw
            return
        super().save_model(request, obj, form, change)

    def response_add(self, request, obj, post_url_continue=None):
        """The new raw key on its own page (no-store), instead of a message that would travel in the
        messages cookie."""
        raw = getattr(request, "_new_api_key", None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "New API key",
            "key": obj,
            "raw_key": raw,
            "opts": self.model._meta,
            "changelist_url": reverse("admin:batches_apikey_changelist"),
        }
        response = TemplateResponse(request, "admin/batches/apikey/created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: ApiKey) -> str:
        return short_datetime(obj.created_at)

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj: ApiKey) -> str:
        return short_datetime(obj.last_used_at)

    @admin.display(description="revoked at", ordering="revoked_at")
    def revoked(self, obj: ApiKey) -> str:
        return short_datetime(obj.revoked_at)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:  # one save per key: the revocation is recorded in the config history
            revoke_api_key(key)
        count = len(keys)
        self.message_user(request, f"Revoked {count} key(s).")


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    # Fits 1280 px: a short id (full id on hover and on the change page), counts in one column.
    list_display = ["short_id", "team", "status", "counts", "created", "completed", "items_link"]
    list_filter = ["status", "team"]
    search_fields = ["id"]
    date_hierarchy = "created_at"
    list_select_related = ["team"]
    show_full_result_count = False
    exclude = ["api_key"]
    actions = ["cancel_batches"]

    def has_cancel_permission(self, request) -> bool:
        return request.user.has_perm("batches.cancel_batch")

    @admin.action(
        description="Cancel selected batches (unsent items; in-flight ones finish)", permissions=["cancel"]
    )
    def cancel_batches(self, request, queryset) -> None:
        """What POST /api/v1/batches/{id}/cancel does, for staff: batches.execution.cancel_batch each."""
        from .execution import cancel_batch, cancellable

        open_batches = [b for b in queryset if cancellable(b)]
        for batch in open_batches:
            cancel_batch(str(batch.pk))
        skipped = queryset.count() - len(open_batches)
        message = f"Cancelled {len(open_batches)} batch(es)"
        if skipped:
            message += f"; {skipped} had already finished and were left as they are"
        self.message_user(request, message + ".", messages.SUCCESS if open_batches else messages.WARNING)

    @admin.display(description="batch", ordering="id")
    def short_id(self, obj: Batch):
        return format_html('<span title="{}">{}…</span>', obj.pk, str(obj.pk)[:8])

    @admin.display(description="succeeded / failed / total")
    def counts(self, obj: Batch) -> str:
        return f"{obj.completed_count:,} / {obj.failed_count:,} / {obj.total_count:,}"

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Batch) -> str:
        return short_datetime(obj.created_at)

    @admin.display(description="finished", ordering="completed_at")
    def completed(self, obj: Batch) -> str:
        return short_datetime(obj.completed_at)

    @admin.display(description="items")
    def items_link(self, obj: Batch):
        url = reverse("admin:batches_batchitem_changelist") + f"?batch__id__exact={obj.pk}"
        dashboard = reverse("dashboard:batch_detail", args=[obj.pk])
        return format_html(
            '<a href="{}">{} items</a> · <a href="{}">dashboard</a>', url, obj.total_count, dashboard
        )


@admin.register(BatchItem)
class BatchItemAdmin(ReadOnlyAdmin):
    list_display = ["custom_id", "batch", "seq", "status", "provider", "attempts", "latency_ms", "error_type"]
    list_filter = ["status", "error_type", "provider"]
    search_fields = ["custom_id"]
    show_full_result_count = False
    raw_id_fields = ["batch"]


@admin.register(TeamUsageDaily)
class TeamUsageDailyAdmin(ReadOnlyAdmin):
    list_display = ["day", "team", "provider", "requests", "prompt", "completion", "wasted", "items"]
    list_filter = ["team", "provider"]
    date_hierarchy = "day"
    list_select_related = ["team"]

    @admin.display(description="prompt tok.", ordering="prompt_tokens")
    def prompt(self, obj: TeamUsageDaily) -> str:
        return f"{obj.prompt_tokens:,}"

    @admin.display(description="completion tok.", ordering="completion_tokens")
    def completion(self, obj: TeamUsageDaily) -> str:
        return f"{obj.completion_tokens:,}"

    @admin.display(description="wasted tok.", ordering="wasted_tokens")
    def wasted(self, obj: TeamUsageDaily) -> str:
        return f"{obj.wasted_tokens:,}"

    @admin.display(description="items ok / failed")
    def items(self, obj: TeamUsageDaily) -> str:
        return f"{obj.items_succeeded:,} / {obj.items_failed:,}"

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from gateway_site.admin_tools import short_datetime

from .models import Batch, BatchItem, TeamUsageDaily


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


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

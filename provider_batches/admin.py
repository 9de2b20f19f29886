"""Provider batches in the admin: read-only (the route writes them); an ``ambiguous`` row is where an
operator looks after a crash left several candidate provider batches (docs/provider_batches.md)."""

from django.contrib import admin

from .models import ProviderBatch


@admin.register(ProviderBatch)
class ProviderBatchAdmin(admin.ModelAdmin):
    list_display = ["id", "batch", "provider", "state", "remote_id", "remote_state", "line_count",
                    "applied_count", "realtime_count", "created_at", "ended_at"]  # fmt: skip
    list_filter = ["state", "provider"]
    search_fields = ["id", "remote_id", "batch__id"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

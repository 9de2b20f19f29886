from django.contrib import admin

from .models import InteractiveCall


@admin.register(InteractiveCall)
class InteractiveCallAdmin(admin.ModelAdmin):
    list_display = ("call_id", "created_at", "team", "model", "provider", "stream", "status", "http_status",
                    "attempts", "latency_ms", "prompt_tokens", "completion_tokens")  # fmt: skip
    list_filter = ("status", "stream", "provider", "team")
    search_fields = ("call_id", "model", "provider")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

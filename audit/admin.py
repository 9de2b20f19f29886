import json

from django.contrib import admin
from django.utils.html import format_html

from .models import ConfigChange


@admin.register(ConfigChange)
class ConfigChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "actor", "via", "model", "object_repr", "action", "summary"]
    list_filter = ["model", "action", "via"]
    search_fields = ["object_repr", "actor", "object_id"]
    date_hierarchy = "at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="changes")
    def summary(self, obj: ConfigChange) -> str:
        return format_html("<code>{}</code>", summarize(obj.changes))


def summarize(changes: dict, limit: int = 300) -> str:
    parts = []
    for name, value in changes.items():
        if isinstance(value, dict):
            parts.append(f"{name}: {json.dumps(value.get('old'))} → {json.dumps(value.get('new'))}")
        else:
            parts.append(f"{name}: {value}")
    text = "; ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"

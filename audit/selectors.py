"""Read side of the configuration history."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import ConfigChange

MODELS = ("provider", "routing rule", "team", "API key")


def config_history(*, model: str = "", object_repr: str = "") -> QuerySet[ConfigChange]:
    qs = ConfigChange.objects.order_by("-at", "-id")
    if model:
        qs = qs.filter(model=model)
    if object_repr:
        qs = qs.filter(object_repr__icontains=object_repr)
    return qs


def change_lines(change: ConfigChange) -> list[tuple[str, str, str]]:
    """(field, old, new) per changed field, for display; a secret shows as ("api_key", "", "changed")."""
    out = []
    for name, value in sorted(change.changes.items()):
        if isinstance(value, dict):
            old, new = value.get("old"), value.get("new")
            out.append((name, "" if old is None else str(old), "" if new is None else str(new)))
        else:
            out.append((name, "", str(value)))
    return out

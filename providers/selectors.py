"""Read-side queries for providers and routing rules."""

from __future__ import annotations

from .models import RoutingRule


def known_route_names() -> set[str]:
    """Routes that have at least one enabled rule pointing at an enabled provider."""
    return set(
        RoutingRule.objects.filter(enabled=True, provider__enabled=True)
        .values_list("route", flat=True)
        .distinct()
    )

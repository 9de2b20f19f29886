"""Read-side queries for providers and routing rules."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Provider, RoutingRule


def enabled_providers() -> QuerySet[Provider]:
    return Provider.objects.filter(enabled=True).order_by("name")


def known_route_names() -> set[str]:
    """Routes that have at least one enabled rule pointing at an enabled provider."""
    return set(
        RoutingRule.objects.filter(enabled=True, provider__enabled=True)
        .values_list("route", flat=True)
        .distinct()
    )


def rules_for_routes(routes: set[str]) -> QuerySet[RoutingRule]:
    return (
        RoutingRule.objects.filter(route__in=routes, enabled=True, provider__enabled=True)
        .select_related("provider")
        .order_by("route", "priority", "provider__name")
    )

"""The interactive lane beside the batches on the staff pages: its recent calls per provider (the
providers page) and its failed calls (the failures browser), read from its request log
(interactive.models.InteractiveCall)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Avg, Count, Q, QuerySet
from django.utils import timezone

from interactive.models import InteractiveCall
from teams.models import Team

from .providers import RECENT_WINDOW

FAILED_SHOWN = 50


@dataclass(frozen=True)
class RecentInteractive:
    calls: int
    failed: int
    streams: int
    avg_latency_ms: float | None
    avg_queue_ms: float | None

    @property
    def error_rate_pct(self) -> float | None:
        return 100.0 * self.failed / self.calls if self.calls else None


def recent_interactive(now: dt.datetime | None = None) -> dict[str, RecentInteractive]:
    """Per provider: interactive calls of the last RECENT_WINDOW, failed ones, streams, average latency
    and queue wait (one query; calls that never reached a provider are under "")."""
    since = (now or timezone.now()) - RECENT_WINDOW
    rows = (
        InteractiveCall.objects.filter(created_at__gte=since)
        .values("provider")
        .annotate(
            n=Count("id"),
            failed=Count("id", filter=~Q(status="succeeded")),
            streams=Count("id", filter=Q(stream=True)),
            avg=Avg("latency_ms"),
            queue=Avg("queue_ms"),
        )  # fmt: skip
        .order_by()
    )
    return {
        r["provider"]: RecentInteractive(r["n"], r["failed"], r["streams"], r["avg"], r["queue"])
        for r in rows
    }


def interactive_failures(
    *,
    provider: str = "",
    team: Team | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> QuerySet[InteractiveCall]:
    """Interactive calls that did not succeed (queue timeouts included), newest first."""
    qs = InteractiveCall.objects.exclude(status="succeeded").select_related("team")
    if provider:
        qs = qs.filter(provider=provider)
    if team is not None:
        qs = qs.filter(team=team)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    return qs.order_by("-created_at")

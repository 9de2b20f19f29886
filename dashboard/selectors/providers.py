"""The providers page: each provider's configuration as it may be shown (never its key) and its
recent activity (items finished in the last minutes)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Avg, Count, Q, QuerySet
from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from gateway_engine.retry import ErrorType
from providers.models import Provider


@dataclass
class RecentProviderActivity:
    finished: int
    failed: int
    timeouts: int
    avg_latency_ms: float | None
    error_rate_pct: float | None
    moved_in: int = 0  # of them, items it took from a held-back peer's queue (routing by capacity)


RECENT_WINDOW = dt.timedelta(minutes=5)


def batches_active_since(since: dt.datetime) -> QuerySet:
    """Ids of the batches that can hold items finished since ``since`` (still active, or finalized
    since then). BatchItem has no index on finished_at alone: filtering the items by these batches
    lets the batch_id index do the work."""
    return Batch.objects.filter(
        Q(status__in=[BatchStatus.QUEUED, BatchStatus.RUNNING]) | Q(completed_at__gte=since)
    ).values("pk")


def recent_activity(now: dt.datetime | None = None) -> dict[str, RecentProviderActivity]:
    """Per provider: items finished in the last 5 minutes, failures, avg latency, items moved to it from
    held-back peers (one query)."""
    since = (now or timezone.now()) - RECENT_WINDOW
    rows = (
        BatchItem.objects.filter(batch__in=batches_active_since(since), finished_at__gte=since)
        .exclude(provider="")
        .values("provider")
        .annotate(
            n=Count("id"),
            failed=Count("id", filter=Q(status=ItemStatus.FAILED)),
            timeouts=Count("id", filter=Q(status=ItemStatus.FAILED, error_type=ErrorType.TIMEOUT)),
            avg=Avg("latency_ms"),
            moved_in=Count("id", filter=~Q(moved_from="")),
        )
        .order_by()
    )
    return {
        r["provider"]: RecentProviderActivity(
            finished=r["n"],
            failed=r["failed"],
            timeouts=r["timeouts"],
            avg_latency_ms=r["avg"],
            error_rate_pct=(100.0 * r["failed"] / r["n"]) if r["n"] else None,
            moved_in=r["moved_in"],
        )
        for r in rows
    }


@dataclass(frozen=True)
class ProviderConfigView:
    """What the providers page may show of a provider. Deliberately has no api_key field."""

    name: str
    base_url: str
    model: str
    rpm: int
    tpm: int
    max_concurrency: int
    burst_seconds: float
    timeout_seconds: float
    max_retries: int
    enabled: bool
    key_source: str  # Provider.api_key_source: "environment", "database" or "none" — never the key itself
    routes: tuple[str, ...]
    kind: str = "openai"
    deployment: str = ""  # azure_openai
    api_version: str = ""  # azure_openai
    itpm: int | None = None
    otpm: int | None = None


def provider_configs() -> list[tuple[ProviderConfigView, object]]:
    """(safe view, Provider) pairs; the Provider is for building quota limits, not for templates."""
    out = []
    for p in Provider.objects.prefetch_related("routes").order_by("name"):
        routes = tuple(
            sorted(
                f"{r.route} (p{r.priority}, w{r.weight}{'' if r.enabled else ', off'})"
                for r in p.routes.all()
            )
        )
        view = ProviderConfigView(
            name=p.name,
            base_url=p.base_url,
            model=p.model,
            rpm=p.rpm,
            tpm=p.tpm,
            max_concurrency=p.max_concurrency,
            burst_seconds=p.burst_seconds,
            timeout_seconds=p.timeout_seconds,
            max_retries=p.max_retries,
            enabled=p.enabled,
            key_source=p.api_key_source,
            routes=routes,
            kind=p.kind,
            deployment=p.deployment,
            api_version=p.api_version,
            itpm=p.itpm,
            otpm=p.otpm,
        )
        out.append((view, p))
    return out

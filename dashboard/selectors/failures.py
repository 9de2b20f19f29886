"""The failures browser: failed items across batches, grouped by provider × error class and by status
code, read from the partial index on failed items (batchitem_failed_recent)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, QuerySet

from batches.models import BatchItem, ItemStatus
from gateway_engine.retry import ERROR_CLASS_KEYS
from providers.models import Provider
from teams.models import Team

from .batch_detail import LIST_ITEM_FIELDS
from .error_classes import ERROR_CLASSES, error_class_expr, error_class_q


def failures(
    *,
    provider: str = "",
    error_class: str = "",
    status_code: int | None = None,
    team: Team | None = None,
    batch_id=None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> QuerySet[BatchItem]:
    """Failed items across batches, newest first (partial index batchitem_failed_recent)."""
    qs = BatchItem.objects.filter(status=ItemStatus.FAILED)
    if batch_id is not None:
        qs = qs.filter(batch_id=batch_id)
    if provider:
        qs = qs.filter(provider=provider)
    if error_class:
        qs = qs.filter(error_class_q(error_class))
    if status_code is not None:
        qs = qs.filter(error_status_code=status_code)
    if team is not None:
        qs = qs.filter(batch__team=team)
    if since is not None:
        qs = qs.filter(finished_at__gte=since)
    if until is not None:
        qs = qs.filter(finished_at__lt=until)
    return qs


@dataclass
class FailureGroups:
    classes: list[tuple[str, str]]
    rows: list[dict]  # {"provider", "counts": [n per class], "total"}
    totals: list[int]
    total: int
    status_codes: list[tuple[int | None, int]]


def failure_groups(qs: QuerySet[BatchItem]) -> FailureGroups:
    """Counts by provider × error class, and by status code: two GROUP BY queries."""
    grouped = (
        qs.annotate(klass=error_class_expr()).values("provider", "klass").annotate(n=Count("id")).order_by()
    )
    by_provider: dict[str, dict[str, int]] = defaultdict(dict)
    for row in grouped:
        by_provider[row["provider"] or "(none)"][row["klass"]] = row["n"]
    rows, totals = [], [0] * len(ERROR_CLASS_KEYS)
    for name in sorted(by_provider):
        counts = [by_provider[name].get(key, 0) for key in ERROR_CLASS_KEYS]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        rows.append({"provider": name, "counts": counts, "total": sum(counts)})
    rows.sort(key=lambda r: -r["total"])
    codes = qs.values("error_status_code").annotate(n=Count("id")).order_by("-n")[:12]
    return FailureGroups(
        classes=ERROR_CLASSES,
        rows=rows,
        totals=totals,
        total=sum(totals),
        status_codes=[(c["error_status_code"], c["n"]) for c in codes],
    )


def failure_list(qs: QuerySet[BatchItem]) -> QuerySet[BatchItem]:
    return (
        qs.select_related("batch__team")
        .only(*LIST_ITEM_FIELDS, "batch__id", "batch__team__name")
        .order_by("-finished_at", "-id")
    )


def provider_names() -> list[str]:
    return list(Provider.objects.order_by("name").values_list("name", flat=True))

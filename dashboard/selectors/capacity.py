"""The providers page's capacity advisor: the observed p50 latency per provider fed, with the page's
config and live quota numbers, to the rule in batches.scheduling.capacity (issue #12)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict

from django.db import connection
from django.db.models import Aggregate, Count, FloatField
from django.utils import timezone

from batches.models import BatchItem
from batches.scheduling.capacity import CapacityAdvice, advise

from .providers import batches_active_since

LATENCY_WINDOW = dt.timedelta(hours=1)
LATENCY_MAX_SAMPLES = 20_000


class Median(Aggregate):
    """PostgreSQL's median (percentile_cont 0.5)."""

    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def recent_latency_p50(now: dt.datetime | None = None) -> dict[str, tuple[float, int]]:
    """{provider: (p50 latency in ms, samples)} of items finished in the last hour (one query).

    PostgreSQL: percentile_cont in the database; other databases: the median of at most
    LATENCY_MAX_SAMPLES recent latencies computed here."""
    since = (now or timezone.now()) - LATENCY_WINDOW
    qs = BatchItem.objects.filter(
        batch__in=batches_active_since(since), finished_at__gte=since, latency_ms__isnull=False
    ).exclude(provider="")
    if connection.vendor == "postgresql":
        rows = qs.values("provider").annotate(p50=Median("latency_ms"), n=Count("id")).order_by()
        return {r["provider"]: (float(r["p50"]), r["n"]) for r in rows}
    values: dict[str, list[int]] = defaultdict(list)
    for provider, latency in qs.order_by("-finished_at").values_list("provider", "latency_ms")[
        :LATENCY_MAX_SAMPLES
    ]:
        values[provider].append(latency)
    return {p: (float(statistics.median(v)), len(v)) for p, v in values.items()}


def capacity_advice(rows: list[dict]) -> list[CapacityAdvice]:
    """One CapacityAdvice per providers-page row (uses the row's config, live quota and lease fill)."""
    latency = recent_latency_p50()
    out = []
    for row in rows:
        config, state = row["config"], row.get("quota")
        p50, samples = latency.get(config.name, (None, 0))
        out.append(
            advise(
                config.name,
                p50_latency_ms=p50,
                samples=samples,
                rpm=config.rpm,
                max_concurrency=config.max_concurrency,
                leases_in_flight=getattr(state, "leases_in_flight", None),
                rpm_fill_pct=row.get("rpm_fill_pct"),
            )
        )
    return out

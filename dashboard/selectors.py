"""Read-side queries for the dashboards.

Every function here issues a small, fixed number of queries whatever the batch size: lists read the
Batch counters and TeamUsageDaily; per-batch numbers come from Batch.stats plus one GROUP BY over the
batch's items (index batchitem_batch_status); failure lists read the partial index on failed items.
Large JSON columns (payload, response, attempt_log) are never loaded in lists.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Avg, Case, Count, IntegerField, Q, QuerySet, Sum, Value, When
from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ErrorType, ItemStatus, TeamUsageDaily
from batches.selectors import USAGE_SUMS
from gateway_engine.retry import (
    CLASS_OTHER,
    ERROR_CLASS_KEYS,
    ERROR_CLASS_TABLE,
    OTHER_LABEL,
    ErrorClassRule,
)
from providers.models import Provider
from teams.models import Team

# --- error classes (docs/seed.md §5.3 step one: which provider, 4xx or 5xx) --------------------------------
# Generated from the engine's ONE table (gateway_engine.retry.ERROR_CLASS_TABLE): the SQL below and
# the engine's classifier cannot disagree.

ERROR_CLASSES = [(rule.key, rule.label) for rule in ERROR_CLASS_TABLE] + [(CLASS_OTHER, OTHER_LABEL)]


def _rule_q(rule: ErrorClassRule) -> Q:
    """The rule as a Q: error_type in its types OR status code in its range (NULL status: no match)."""
    q = Q(error_type__in=sorted(rule.types)) if rule.types else Q(pk__in=[])
    if (bounds := rule.status_range) is not None:
        q |= Q(error_status_code__gte=bounds[0], error_status_code__lt=bounds[1])
    return q


# Mutually exclusive, checked in table order (a 429 is not counted as a generic 4xx).
_CLASS_CONDITIONS: list[tuple[str, Q]] = [(rule.key, _rule_q(rule)) for rule in ERROR_CLASS_TABLE]


def error_class_q(klass: str) -> Q:
    """Q selecting failed items of one error class (same precedence as the grouped counts)."""
    q = Q()
    for key, cond in _CLASS_CONDITIONS:
        if key == klass:
            return q & cond
        q &= ~cond
    if klass == CLASS_OTHER:
        return q
    raise ValueError(f"unknown error class {klass!r}; expected one of {ERROR_CLASS_KEYS}")


def error_class_expr() -> Case:
    """SQL CASE giving each row its class, generated from the table."""
    return Case(*[When(cond, then=Value(key)) for key, cond in _CLASS_CONDITIONS], default=Value(CLASS_OTHER))


# --- batch history ------------------------------------------------------------------------------


def _day_start(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min), dt.UTC)


def batch_history(
    *,
    team: Team | None = None,
    status: str = "",
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
) -> QuerySet[Batch]:
    """Batches newest first; filters use the (team|status, -created_at) indexes."""
    qs = Batch.objects.select_related("team").defer("metadata", "api_key")
    if team is not None:
        qs = qs.filter(team=team)
    if status:
        qs = qs.filter(status=status)
    if date_from:
        qs = qs.filter(created_at__gte=_day_start(date_from))
    if date_to:
        qs = qs.filter(created_at__lt=_day_start(date_to + dt.timedelta(days=1)))
    return qs.order_by("-created_at")


@dataclass
class BatchSummary:
    """What the history table and the detail header show, from the Batch row alone."""

    batch: Batch
    total: int
    succeeded: int
    failed: int
    cancelled: int
    expired: int
    finished: int  # in a terminal state (succeeded, failed, cancelled, expired)
    progress_pct: float  # finished / total
    succeeded_pct: float  # the progress bar's segments, each a share of total
    failed_pct: float
    skipped_pct: float  # cancelled or expired: never sent
    success_rate: float | None  # succeeded / (succeeded + failed); None before anything finished
    duration: dt.timedelta | None
    providers: list[str]


def _share(part: int, total: int) -> float:
    return min(100.0, 100.0 * part / total) if total else 0.0


def summarize_batch(batch: Batch, now: dt.datetime | None = None) -> BatchSummary:
    total = batch.total_count
    succeeded, failed, cancelled = batch.completed_count, batch.failed_count, batch.cancelled_count
    expired = batch.expired_count
    finished = succeeded + failed + cancelled + expired
    decided = succeeded + failed
    stats = batch.stats or {}
    duration = None
    if stats.get("total_elapsed_ms") and batch.is_terminal:
        duration = dt.timedelta(milliseconds=int(stats["total_elapsed_ms"]))
    elif batch.started_at:
        end = batch.completed_at or now or timezone.now()
        duration = end - batch.started_at
    return BatchSummary(
        batch=batch,
        total=total,
        succeeded=succeeded,
        failed=failed,
        cancelled=cancelled,
        expired=expired,
        finished=finished,
        progress_pct=_share(finished, total),
        succeeded_pct=_share(succeeded, total),
        failed_pct=_share(failed, total),
        skipped_pct=_share(cancelled + expired, total),
        success_rate=(100.0 * succeeded / decided) if decided else None,
        duration=duration,
        providers=sorted((stats.get("providers") or {}).keys()),
    )


# --- batch detail -------------------------------------------------------------------------------


def cancellable(batch: Batch) -> bool:
    """Whether cancelling still changes anything: batches.execution.cancel_batch leaves a finished batch
    as it is (a cancelled batch still finishing its in-flight items can be swept again)."""
    from batches.execution.finalize import FINISHED_STATUSES

    return batch.completed_at is None and batch.status not in FINISHED_STATUSES


def retry_origin(batch: Batch) -> Batch | None:
    """The batch this one re-ran (batches.retry writes its id as metadata "retry_of"), or None.

    Metadata is data: the value is used only when it is a UUID string naming a batch of the same team
    (rows stored before clients were refused that key may hold anything)."""
    from batches.retry import RETRY_OF_KEY

    metadata = batch.metadata
    value = metadata.get(RETRY_OF_KEY) if isinstance(metadata, dict) else None
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        origin_id = uuid.UUID(value)
    except ValueError:
        return None
    if origin_id == batch.pk:
        return None
    return Batch.objects.filter(pk=origin_id, team_id=batch.team_id).only("id", "team_id").first()


LATENCY_BUCKETS_MS = [250, 500, 1000, 2000, 4000, 8000, 16000, 32000]


def _bucket_label(i: int) -> str:
    def fmt(ms: int) -> str:
        return f"{ms // 1000}s" if ms >= 1000 else f"{ms}ms"

    if i == 0:
        return f"<{fmt(LATENCY_BUCKETS_MS[0])}"
    if i == len(LATENCY_BUCKETS_MS):
        return f"≥{fmt(LATENCY_BUCKETS_MS[-1])}"
    return f"{fmt(LATENCY_BUCKETS_MS[i - 1])}–{fmt(LATENCY_BUCKETS_MS[i])}"


def latency_histogram(batch: Batch) -> list[tuple[str, int]]:
    """Finished items by latency bucket, one GROUP BY query."""
    bucket = Case(
        *[When(latency_ms__lt=edge, then=Value(i)) for i, edge in enumerate(LATENCY_BUCKETS_MS)],
        default=Value(len(LATENCY_BUCKETS_MS)),
        output_field=IntegerField(),
    )
    rows = (
        BatchItem.objects.filter(batch=batch, latency_ms__isnull=False)
        .annotate(bucket=bucket)
        .values("bucket")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = {row["bucket"]: row["n"] for row in rows}
    return [(_bucket_label(i), counts.get(i, 0)) for i in range(len(LATENCY_BUCKETS_MS) + 1)]


def progress_over_time(
    batch: Batch, now: dt.datetime | None = None
) -> tuple[str, list[tuple[dt.datetime, int, int]]]:
    """(granularity, [(bucket start, succeeded, failed)]) of items finished per minute/hour/day.

    One GROUP BY over the batch's items; the granularity keeps the chart under ~180 bars.
    """
    from django.db.models.functions import TruncDay, TruncHour, TruncMinute

    start = batch.started_at or batch.created_at
    end = batch.completed_at or now or timezone.now()
    span = max(end - start, dt.timedelta(0))
    if span <= dt.timedelta(hours=3):
        unit, trunc = "minute", TruncMinute
    elif span <= dt.timedelta(days=7):
        unit, trunc = "hour", TruncHour
    else:
        unit, trunc = "day", TruncDay
    rows = (
        BatchItem.objects.filter(batch=batch, finished_at__isnull=False)
        .annotate(bucket=trunc("finished_at"))
        .values("bucket")
        .annotate(
            ok=Count("id", filter=Q(status=ItemStatus.SUCCEEDED)),
            failed=Count("id", filter=Q(status=ItemStatus.FAILED)),
        )
        .order_by("bucket")
    )
    found = {r["bucket"]: (r["ok"], r["failed"]) for r in rows}
    # a continuous time axis from the start to now/the end, empty buckets included
    step = {"minute": dt.timedelta(minutes=1), "hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}[
        unit
    ]
    cursor = _truncate(start, unit)
    last = _truncate(max(end, *found.keys()) if found else end, unit)
    out = []
    while cursor <= last and len(out) < 400:
        ok, failed = found.get(cursor, (0, 0))
        out.append((cursor, ok, failed))
        cursor += step
    return unit, out


def _truncate(moment: dt.datetime, unit: str) -> dt.datetime:
    moment = moment.astimezone(dt.UTC).replace(second=0, microsecond=0)
    if unit in ("hour", "day"):
        moment = moment.replace(minute=0)
    if unit == "day":
        moment = moment.replace(hour=0)
    return moment


@dataclass
class ProviderBatchRow:
    """One line of the seed's batch log, per provider.

    Attempt-level numbers come from Batch.stats (the engine builds them from every attempt, fallbacks
    and retries included). Item-level numbers come from one GROUP BY over the items, so a running batch
    shows live progress; they attribute an item to the provider that answered last.
    """

    provider: str
    # from Batch.stats (attempt level, written by the engine)
    attempts: int | None = None
    avg_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    error_count: int | None = None
    retry_count: int | None = None
    rate_limited_count: int | None = None
    errors_by_class: dict[str, int] | None = None
    stats_tokens: dict[str, int] = field(default_factory=dict)
    # from the items
    items_succeeded: int = 0
    items_failed: int = 0
    failed_by_class: dict[str, int] = field(default_factory=dict)
    item_attempts: int = 0
    item_avg_latency_ms: float | None = None
    item_tokens: dict[str, int] = field(default_factory=dict)

    @property
    def shown_attempts(self) -> int:
        return self.attempts if self.attempts is not None else self.item_attempts

    @property
    def shown_avg_latency_ms(self) -> float | None:
        return self.avg_latency_ms if self.avg_latency_ms is not None else self.item_avg_latency_ms

    @property
    def errors_are_attempt_level(self) -> bool:
        return self.errors_by_class is not None

    @property
    def shown_errors(self) -> dict[str, int]:
        """Errors by class: per attempt from the stats when written, else failed items by class."""
        if self.errors_by_class is None:
            return self.failed_by_class
        shown = dict.fromkeys(ERROR_CLASS_KEYS, 0)
        for key, n in self.errors_by_class.items():
            shown[key if key in shown else "other"] += int(n or 0)
        return shown

    def _tokens(self, key: str) -> int:
        return self.stats_tokens[key] if key in self.stats_tokens else self.item_tokens.get(key, 0)

    @property
    def prompt_tokens(self) -> int:
        return self._tokens("prompt_tokens")

    @property
    def completion_tokens(self) -> int:
        return self._tokens("completion_tokens")

    @property
    def retry_extra_tokens(self) -> int:
        return self._tokens("retry_extra_tokens")


_STATS_KEYS = {
    "request_count": "attempts",
    "avg_latency_ms": "avg_latency_ms",
    "p95_latency_ms": "p95_latency_ms",
    "error_count": "error_count",
    "retry_count": "retry_count",
    "rate_limited_count": "rate_limited_count",
}
_TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "retry_extra_tokens")


def provider_breakdown(batch: Batch) -> list[ProviderBatchRow]:
    """Batch.stats per provider merged with one aggregate query over the batch's items."""
    rows: dict[str, ProviderBatchRow] = {}
    for name, entry in ((batch.stats or {}).get("providers") or {}).items():
        row = rows[name] = ProviderBatchRow(provider=name)
        entry = entry or {}
        for key, attr in _STATS_KEYS.items():
            if key in entry:
                setattr(row, attr, entry[key])
        if isinstance(entry.get("errors_by_class"), dict):
            row.errors_by_class = dict(entry["errors_by_class"])
        row.stats_tokens = {k: int(entry[k]) for k in _TOKEN_KEYS if entry.get(k) is not None}
    failed = Q(status=ItemStatus.FAILED)
    aggregates = {
        "succeeded": Count("id", filter=Q(status=ItemStatus.SUCCEEDED)),
        "failed": Count("id", filter=failed),
        "attempts_sum": Sum("attempts"),
        "avg_latency": Avg("latency_ms"),
        "prompt": Sum("prompt_tokens"),
        "completion": Sum("completion_tokens"),
        "extra": Sum("retry_extra_tokens"),
    }
    for key in ERROR_CLASS_KEYS:
        aggregates[f"c_{key}"] = Count("id", filter=failed & error_class_q(key))
    agg = (
        BatchItem.objects.filter(batch=batch)
        .exclude(provider="")
        .values("provider")
        .annotate(**aggregates)
        .order_by()
    )
    for a in agg:
        row = rows.setdefault(a["provider"], ProviderBatchRow(provider=a["provider"]))
        row.items_succeeded = a["succeeded"]
        row.items_failed = a["failed"]
        row.item_attempts = a["attempts_sum"] or 0
        row.item_avg_latency_ms = a["avg_latency"]
        row.item_tokens = {
            "prompt_tokens": a["prompt"] or 0,
            "completion_tokens": a["completion"] or 0,
            "retry_extra_tokens": a["extra"] or 0,
        }
        row.failed_by_class = {key: a[f"c_{key}"] for key in ERROR_CLASS_KEYS}
    for row in rows.values():
        for key in ERROR_CLASS_KEYS:
            row.failed_by_class.setdefault(key, 0)
    return [rows[name] for name in sorted(rows)]


LIST_ITEM_FIELDS = (
    "id",
    "batch_id",
    "seq",
    "custom_id",
    "route",
    "status",
    "provider",
    "attempts",
    "latency_ms",
    "error_type",
    "error_status_code",
    "error_message",
    "finished_at",
)


def batch_items(batch: Batch, status: str | None = None) -> QuerySet[BatchItem]:
    """The batch's items in submission order, optionally of one status (the batch page's item list)."""
    qs = BatchItem.objects.filter(batch=batch)
    if status:
        qs = qs.filter(status=status)
    return qs.only(*LIST_ITEM_FIELDS).order_by("seq")


def item_detail(item_id: int) -> BatchItem:
    return BatchItem.objects.select_related("batch__team").get(pk=item_id)


# --- failures browser ---------------------------------------------------------------------------


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


# --- providers page -----------------------------------------------------------------------------


@dataclass
class RecentProviderActivity:
    finished: int
    failed: int
    timeouts: int
    avg_latency_ms: float | None
    error_rate_pct: float | None


RECENT_WINDOW = dt.timedelta(minutes=5)


def recent_activity(now: dt.datetime | None = None) -> dict[str, RecentProviderActivity]:
    """Per provider: items finished in the last 5 minutes, failures, avg latency (one query)."""
    since = (now or timezone.now()) - RECENT_WINDOW
    # BatchItem has no index on finished_at alone: restrict to batches that can hold recently finished
    # items (still active, or finalized inside the window), so the batch_id index does the work.
    active = Batch.objects.filter(
        Q(status__in=[BatchStatus.QUEUED, BatchStatus.RUNNING]) | Q(completed_at__gte=since)
    ).values("pk")
    rows = (
        BatchItem.objects.filter(batch__in=active, finished_at__gte=since)
        .exclude(provider="")
        .values("provider")
        .annotate(
            n=Count("id"),
            failed=Count("id", filter=Q(status=ItemStatus.FAILED)),
            timeouts=Count("id", filter=Q(status=ItemStatus.FAILED, error_type=ErrorType.TIMEOUT)),
            avg=Avg("latency_ms"),
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
        )
        out.append((view, p))
    return out


# --- team usage audit ---------------------------------------------------------------------------

_USAGE_SUMS = {
    "requests": Sum("requests"),
    "items_succeeded": Sum("items_succeeded"),
    "items_failed": Sum("items_failed"),
    "prompt": Sum("prompt_tokens"),
    "completion": Sum("completion_tokens"),
    "wasted": Sum("wasted_tokens"),
}


def usage_rows(*, date_from: dt.date, date_to: dt.date, team: Team | None = None) -> QuerySet[TeamUsageDaily]:
    qs = TeamUsageDaily.objects.filter(day__gte=date_from, day__lte=date_to)
    if team is not None:
        qs = qs.filter(team=team)
    return qs


def _with_total(row: dict) -> dict:
    for key in _USAGE_SUMS:
        row[key] = row[key] or 0
    row["total"] = row["prompt"] + row["completion"]
    row["wasted_pct"] = (100.0 * row["wasted"] / row["total"]) if row["total"] else None
    return row


def usage_by_team_day(qs: QuerySet[TeamUsageDaily]) -> list[dict]:
    rows = qs.values("team__name", "day").annotate(**_USAGE_SUMS).order_by("-day", "team__name")
    return [_with_total(r) for r in rows]


def usage_by_team_provider(qs: QuerySet[TeamUsageDaily]) -> list[dict]:
    rows = qs.values("team__name", "provider").annotate(**_USAGE_SUMS).order_by("team__name", "provider")
    return [_with_total(r) for r in rows]


def usage_by_day(qs: QuerySet[TeamUsageDaily], date_from: dt.date, date_to: dt.date) -> list[dict]:
    """One row per calendar day in the range (zeros included) for the chart."""
    found = {r["day"]: _with_total(r) for r in qs.values("day").annotate(**_USAGE_SUMS).order_by()}
    out, day = [], date_from
    while day <= date_to:
        out.append(found.get(day) or _with_total({"day": day, **{k: 0 for k in _USAGE_SUMS}}))
        day += dt.timedelta(days=1)
    return out


def usage_csv_rows(qs: QuerySet[TeamUsageDaily]):
    """Detail rows (team, day, provider) for the CSV export, streamed with iterator()."""
    return (
        qs.select_related("team")
        .order_by("day", "team__name", "provider")
        .values_list("day", "team__name", "provider", *USAGE_SUMS)
        .iterator(chunk_size=2000)
    )


# --- capacity advisor and cost (observability, issue #12) ----------------------------------------

LATENCY_WINDOW = dt.timedelta(hours=1)
LATENCY_MAX_SAMPLES = 20_000


def recent_latency_p50(now: dt.datetime | None = None) -> dict[str, tuple[float, int]]:
    """{provider: (p50 latency in ms, samples)} of items finished in the last hour (one query).

    PostgreSQL: percentile_cont in the database; other databases: the median of at most
    LATENCY_MAX_SAMPLES recent latencies computed here."""
    import statistics

    from django.db import connection

    since = (now or timezone.now()) - LATENCY_WINDOW
    active = Batch.objects.filter(
        Q(status__in=[BatchStatus.QUEUED, BatchStatus.RUNNING]) | Q(completed_at__gte=since)
    ).values("pk")
    qs = BatchItem.objects.filter(batch__in=active, finished_at__gte=since, latency_ms__isnull=False).exclude(
        provider=""
    )
    if connection.vendor == "postgresql":
        from django.db.models import Aggregate, FloatField

        class Median(Aggregate):
            function = "percentile_cont"
            template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
            output_field = FloatField()

        rows = qs.values("provider").annotate(p50=Median("latency_ms"), n=Count("id")).order_by()
        return {r["provider"]: (float(r["p50"]), r["n"]) for r in rows}
    values: dict[str, list[int]] = defaultdict(list)
    for provider, latency in qs.order_by("-finished_at").values_list("provider", "latency_ms")[
        :LATENCY_MAX_SAMPLES
    ]:
        values[provider].append(latency)
    return {p: (float(statistics.median(v)), len(v)) for p, v in values.items()}


def capacity_advice(rows: list[dict]) -> list:
    """One CapacityAdvice per providers-page row (uses the row's config, live quota and lease fill)."""
    from observability.capacity import advise

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


def add_usage_costs(by_team_provider: list[dict]) -> dict:
    """Adds ``cost`` / ``wasted_cost`` to each per-team-per-provider usage row (in place; one query for
    the prices) and returns the totals ({"cost", "wasted_cost"}; None = some price unknown)."""
    from providers.pricing import UNKNOWN, prices_by_provider, sum_usage_costs

    prices = prices_by_provider()
    parts = []
    for row in by_team_provider:
        part = (prices.get(row["provider"], UNKNOWN), row["prompt"], row["completion"], row["wasted"])
        row.update(sum_usage_costs([part]))
        parts.append(part)
    return sum_usage_costs(parts)


# --- queues and a batch's place (issue #10, docs/quota.md "Queue visibility") ---------------------

UNASSIGNED_QUEUE = "(no provider queue yet)"


def _queue_key() -> Case:
    """An item's provider queue: queue_provider (set by the scheduler), else the provider it asked for
    by name, else "" (routed at send time)."""
    return Case(
        When(~Q(queue_provider=""), then="queue_provider"),
        When(~Q(requested_provider=""), then="requested_provider"),
        default=Value(""),
    )


@dataclass
class QueueRow:
    provider: str
    team: str
    priority: str
    pending: int


def queued_items_by_provider() -> list[QueueRow]:
    """Pending items per provider queue, team and lane (batch priority): one GROUP BY."""
    rows = (
        BatchItem.objects.filter(status=ItemStatus.PENDING)
        .annotate(queue=_queue_key())
        .values("queue", "batch__team__name", "batch__priority")
        .annotate(n=Count("id"))
        .order_by()
    )
    rank = {"high": 0, "normal": 1, "low": 2}
    out = [
        QueueRow(r["queue"] or UNASSIGNED_QUEUE, r["batch__team__name"], r["batch__priority"], r["n"])
        for r in rows
    ]
    out.sort(key=lambda r: (r.provider, rank.get(r.priority, 9), r.team))
    return out


@dataclass
class BatchPlace:
    provider: str
    pending: int  # this batch's pending items in that provider's queue
    ahead_same_team: int
    ahead_other_teams: int
    rpm: int | None  # the provider's configured rate (None: queue not tied to one provider yet)
    eta_seconds: float | None

    @property
    def ahead(self) -> int:
        return self.ahead_same_team + self.ahead_other_teams


def batch_place(batch: Batch) -> list[BatchPlace]:
    """Where the batch stands in each provider queue it has pending items in, and when it should be done.

    Approximation of the fair order (see docs/quota.md): ahead of this batch are (1) pending items of
    the same team's batches in a higher lane, or in the same lane and older, and (2) of every other
    team with pending items in that queue, the share the weighted fair order serves while this team
    works through its own items: min(their pending, (same-team ahead + ours) × their weight / ours).
    ETA = (ahead + ours) / the provider's configured RPM. In-flight items and retries are ignored."""
    if batch.is_terminal:
        return []
    rows = list(
        BatchItem.objects.filter(status=ItemStatus.PENDING)
        .annotate(queue=_queue_key())
        .values("queue", "batch_id", "batch__team_id", "batch__priority", "batch__created_at")
        .annotate(n=Count("id"))
        .order_by()
    )
    mine = {r["queue"]: r["n"] for r in rows if r["batch_id"] == batch.pk}
    if not mine:
        return []
    from batches.models import PRIORITY_RANK

    weights = dict(Team.objects.values_list("id", "weight"))
    my_weight = max(1, weights.get(batch.team_id, 1))
    my_rank = PRIORITY_RANK.get(batch.priority, 1)
    rpms = dict(Provider.objects.filter(name__in=list(mine)).values_list("name", "rpm"))
    out = []
    for queue, n in sorted(mine.items()):
        same = 0
        others: dict[int, int] = defaultdict(int)
        for r in rows:
            if r["queue"] != queue or r["batch_id"] == batch.pk:
                continue
            if r["batch__team_id"] == batch.team_id:
                rank = PRIORITY_RANK.get(r["batch__priority"], 1)
                if rank > my_rank or (rank == my_rank and r["batch__created_at"] < batch.created_at):
                    same += r["n"]
            else:
                others[r["batch__team_id"]] += r["n"]
        other = sum(
            min(p, int((same + n) * max(1, weights.get(team, 1)) / my_weight)) for team, p in others.items()
        )
        rpm = rpms.get(queue)
        eta = (same + other + n) / (rpm / 60.0) if rpm else None
        out.append(BatchPlace(queue or UNASSIGNED_QUEUE, n, same, other, rpm, eta))
    return out

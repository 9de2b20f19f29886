"""The batch page: where a retry came from, latency and progress charts, the per-provider log, the
item list and one item.

Per-batch numbers come from Batch.stats plus one GROUP BY over the batch's items (index
batchitem_batch_status); large JSON columns (payload, response, attempt_log) are never loaded in lists.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field

from django.db.models import Avg, Case, Count, IntegerField, Q, QuerySet, Sum, Value, When
from django.db.models.functions import TruncDay, TruncHour, TruncMinute
from django.utils import timezone

from batches.models import Batch, BatchItem, ItemStatus
from batches.retry import RETRY_OF_KEY
from gateway_engine.retry import ERROR_CLASS_KEYS

from .error_classes import error_class_q


def retry_origin(batch: Batch) -> Batch | None:
    """The batch this one re-ran (batches.retry writes its id as metadata "retry_of"), or None.

    Metadata is data: the value is used only when it is a UUID string naming a batch of the same team
    (rows stored before clients were refused that key may hold anything)."""
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

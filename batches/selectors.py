"""Read side for batches: a team's batches, item results in submission order, token usage."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

from django.db.models import Count, QuerySet, Sum

from gateway_engine.result import result_dict
from providers.pricing import ProviderTokens, add_usage_costs
from teams.models import Team
from teams.usage import rate_limits, team_usage

from .evaluation import own_id
from .models import Batch, BatchItem, ItemStatus, TeamUsageDaily
from .steps import public_steps

# Columns a RESULT is built from (values_list order matters: see result_from_row).
RESULT_COLUMNS = (
    "seq",
    "custom_id",
    "status",
    "provider",
    "attempts",
    "latency_ms",
    "response",
    "error_type",
    "error_status_code",
    "error_message",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "served_by",
)
# What ``?include=`` may add to each RESULT of the results API (never to /v1 output files): ``native``
# → ``native_response``, the provider's own answer (null for kind openai, whose answer IS ``response``).
RESULT_INCLUDES = ("native",)
NATIVE_COLUMN = "native_response"
# A pipeline item's record (batches.steps): the RESULT gains ``steps``. Read after RESULT_COLUMNS.
PIPELINE_COLUMN = "pipeline"
# An evaluation's copy (batches.submission.fanout): the RESULT gains ``target``. Read after PIPELINE_COLUMN.
TARGET_COLUMN = "target"
# A capacity move (batches.execution.capacity): the RESULT gains ``routed_by``. Read after TARGET_COLUMN.
ROUTED_COLUMNS = ("moved_from", "queue_provider")

USAGE_GROUPS = ("day", "provider", "endpoint")
# TeamUsageDaily's numbers, summed by the usage API and exported (in this order) by the dashboard's CSV
USAGE_SUMS = (
    "requests",
    "items_succeeded",
    "items_failed",
    "prompt_tokens",
    "completion_tokens",
    "wasted_tokens",
)
# The prompt-cache parts of prompt_tokens: summed by the usage API too; the CSV appends them after its
# existing columns (so a column position a spreadsheet reads never moves)
CACHE_SUMS = ("cached_tokens", "cache_write_tokens")
# The provider-batch parts of prompt/completion tokens (the rest is real time): summed by the usage API,
# appended to the CSV after the cache columns (docs/provider_batches.md)
PROVIDER_BATCH_SUMS = ("provider_batch_prompt_tokens", "provider_batch_completion_tokens")


def batches_for_team(team: Team, *, status: str | None = None) -> QuerySet[Batch]:
    """The team's batches, newest first (optionally one status)."""
    qs = Batch.objects.filter(team=team).order_by("-created_at", "-id")
    if status:
        qs = qs.filter(status=status)
    return qs


def get_batch_for_team(team: Team, batch_id: Any) -> Batch:
    """The team's batch; raises Batch.DoesNotExist for unknown ids and other teams' batches alike."""
    return Batch.objects.get(team=team, pk=batch_id)


def item_status_counts(batch: Batch) -> dict[str, int]:
    """{status: count} over every ItemStatus (zeros included): one GROUP BY on the (batch, status)
    index. The batch page and ``submit_batch --wait`` both read it."""
    counts = {status.value: 0 for status in ItemStatus}
    rows = BatchItem.objects.filter(batch=batch).values_list("status").annotate(n=Count("id")).order_by()
    for status, n in rows:
        counts[status] = n
    return counts


def result_from_row(row: tuple, *, native: bool = False) -> dict[str, Any]:
    """One RESULT (docs/contract.md §4) from a values_list row in RESULT_COLUMNS order then the
    PIPELINE_COLUMN, TARGET_COLUMN and the ROUTED_COLUMNS, built by the engine's own builder
    (gateway_engine.result.result_dict); a pipeline item's RESULT gains ``steps``, an evaluation's copy
    ``target`` (and its own custom_id), a moved item's ``routed_by``. With ``native`` the row ends with
    the NATIVE_COLUMN and the RESULT gains ``native_response`` (``?include=native``)."""
    if native:
        *row, native_response = row
    _seq, custom_id, status, *values, pipeline, target, moved_from, queue = row
    result = result_dict(
        own_id(custom_id, target), status, **dict(zip(RESULT_COLUMNS[3:], values, strict=True))
    )
    if target:
        result["target"] = target
    if pipeline is not None:  # a pipeline item: every step run, the last one's fields at the top
        result["steps"] = public_steps(pipeline, result)
    if moved_from:  # a capacity move: the peer that took it from its held-back first choice
        result["routed_by"] = {"rule": queue, "reason": "capacity", "moved_from": moved_from}
    if native:
        result["native_response"] = native_response
    return result


def _result_rows(batch: Batch, statuses: Sequence[str] | None = None, native: bool = False) -> QuerySet:
    qs = BatchItem.objects.filter(batch=batch)
    if statuses:
        qs = qs.filter(status__in=statuses)
    # the native answer is read only when asked for: it can be as large as the response itself
    return qs.order_by("seq").values_list(
        *RESULT_COLUMNS, PIPELINE_COLUMN, TARGET_COLUMN, *ROUTED_COLUMNS, *([NATIVE_COLUMN] if native else [])
    )


def result_page(
    batch: Batch,
    *,
    after: int | None = None,
    limit: int = 100,
    statuses: Sequence[str] | None = None,
    native: bool = False,
) -> tuple[list[dict], int | None]:
    """Up to `limit` RESULTs with seq > `after`, in submission order (keyset pagination on seq),
    optionally only items whose status is in `statuses`, with ``native_response`` when ``native``.

    Returns (results, next_after): next_after is the seq to pass as `after` for the next page, or None.
    """
    qs = _result_rows(batch, statuses, native)
    if after is not None:
        qs = qs.filter(seq__gt=after)
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_after = rows[-1][0] if more and rows else None
    return [result_from_row(row, native=native) for row in rows], next_after


def iter_results(
    batch: Batch, *, chunk_size: int = 2000, statuses: Sequence[str] | None = None, native: bool = False
) -> Iterator[dict[str, Any]]:
    """Every RESULT (optionally of some statuses) in submission order, read with a server-side cursor;
    with ``native_response`` when ``native`` (the /v1 output files never ask: they stay OpenAI-valid)."""
    for row in _result_rows(batch, statuses, native).iterator(chunk_size=chunk_size):
        yield result_from_row(row, native=native)


def usage_for_team(
    team: Team, *, group_by: str = "day", date_from: dt.date | None = None, date_to: dt.date | None = None
) -> dict[str, Any]:
    """Token usage from TeamUsageDaily, summed per day, provider or endpoint, plus totals and the
    per-endpoint sums (``endpoints``: what each surface, chat, embeddings, … used and cost)."""
    if group_by not in USAGE_GROUPS:
        raise ValueError(f"group_by must be one of {USAGE_GROUPS}")
    qs = TeamUsageDaily.objects.filter(team=team)
    if date_from is not None:
        qs = qs.filter(day__gte=date_from)
    if date_to is not None:
        qs = qs.filter(day__lte=date_to)
    rows, costs = _usage_groups(qs, group_by)
    totals = _usage_numbers(qs.aggregate(**USAGE_AGGREGATES))
    totals.update(costs)
    by_endpoint = rows if group_by == "endpoint" else _usage_groups(qs, "endpoint")[0]
    return {
        "group_by": group_by,
        "from": date_from.isoformat() if date_from else None,
        "to": date_to.isoformat() if date_to else None,
        "results": rows,
        "totals": totals,
        "endpoints": {
            row["endpoint"]: {k: v for k, v in row.items() if k != "endpoint"} for row in by_endpoint
        },
        "queue": team_usage().queue_usage(team).as_dict(),
        "rate_limits": rate_limits(team),
    }


USAGE_AGGREGATES = {name: Sum(name) for name in (*USAGE_SUMS, *CACHE_SUMS, *PROVIDER_BATCH_SUMS)}


def _usage_groups(qs: QuerySet[TeamUsageDaily], group_by: str) -> tuple[list[dict[str, Any]], dict]:
    """(one row per ``group_by`` value with its numbers and costs, the costs over every row)."""
    rows = []
    for row in qs.values(group_by).annotate(**USAGE_AGGREGATES).order_by(group_by):
        key = row[group_by]
        entry = {group_by: key.isoformat() if isinstance(key, dt.date) else key}
        entry.update(_usage_numbers(row))
        rows.append(entry)
    tokens = _tokens_by_provider(qs, group_by)
    return rows, add_usage_costs((row, tokens.get(row[group_by], [])) for row in rows)


def _tokens_by_provider(qs: QuerySet[TeamUsageDaily], group_by: str) -> dict[Any, list[ProviderTokens]]:
    """{group key (as in the rows): [((provider, endpoint), prompt, completion, wasted, cached,
    cache_write, batch prompt, batch completion), ...]}: one GROUP BY; each part priced at its
    provider's prices for its endpoint."""
    per_provider = (
        qs.values(*dict.fromkeys((group_by, "provider", "endpoint")))
        .annotate(
            p=Sum("prompt_tokens"),
            c=Sum("completion_tokens"),
            w=Sum("wasted_tokens"),
            r=Sum("cached_tokens"),
            cw=Sum("cache_write_tokens"),
            bp=Sum("provider_batch_prompt_tokens"),
            bc=Sum("provider_batch_completion_tokens"),
        )
        .order_by()
    )
    out: dict[Any, list[ProviderTokens]] = {}
    for row in per_provider:
        key = row[group_by].isoformat() if isinstance(row[group_by], dt.date) else row[group_by]
        p, c, w, r, cw, bp, bc = (int(row[k] or 0) for k in ("p", "c", "w", "r", "cw", "bp", "bc"))
        out.setdefault(key, []).append(((row["provider"], row["endpoint"]), p, c, w, r, cw, bp, bc))
    return out


def _usage_numbers(row: dict[str, Any]) -> dict[str, int]:
    numbers = {name: int(row.get(name) or 0) for name in (*USAGE_SUMS, *CACHE_SUMS, *PROVIDER_BATCH_SUMS)}
    numbers["total_tokens"] = numbers["prompt_tokens"] + numbers["completion_tokens"]
    numbers["realtime_prompt_tokens"] = numbers["prompt_tokens"] - numbers["provider_batch_prompt_tokens"]
    numbers["realtime_completion_tokens"] = (
        numbers["completion_tokens"] - numbers["provider_batch_completion_tokens"]
    )
    return numbers

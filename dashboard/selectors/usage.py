"""The usage audit page and its CSV: TeamUsageDaily summed per team and day, per team, provider and
endpoint (chat, embeddings, …), and per calendar day, with costs (the one cost helper, providers.pricing.add_usage_costs)."""

from __future__ import annotations

import datetime as dt

from django.db.models import Q, QuerySet, Sum

from batches.models import TeamUsageDaily
from batches.selectors import CACHE_SUMS, PROVIDER_BATCH_SUMS, USAGE_SUMS
from gateway_engine.quota import QuotaError
from providers.pricing import add_usage_costs
from teams.models import Team
from teams.usage import rate_limits

_USAGE_SUMS = {
    "requests": Sum("requests"),
    "items_succeeded": Sum("items_succeeded"),
    "items_failed": Sum("items_failed"),
    "prompt": Sum("prompt_tokens"),
    "completion": Sum("completion_tokens"),
    "wasted": Sum("wasted_tokens"),
    "cached": Sum("cached_tokens"),
    "cache_write": Sum("cache_write_tokens"),
    "batch_prompt": Sum("provider_batch_prompt_tokens"),
    "batch_completion": Sum("provider_batch_completion_tokens"),
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
    row["batch_total"] = row["batch_prompt"] + row["batch_completion"]  # the provider-batch part
    row["realtime_total"] = row["total"] - row["batch_total"]
    row["wasted_pct"] = (100.0 * row["wasted"] / row["total"]) if row["total"] else None
    return row


def usage_by_team_day(qs: QuerySet[TeamUsageDaily]) -> list[dict]:
    rows = qs.values("team__name", "day").annotate(**_USAGE_SUMS).order_by("-day", "team__name")
    return [_with_total(r) for r in rows]


def usage_by_team_provider(qs: QuerySet[TeamUsageDaily]) -> list[dict]:
    """One row per team, provider and endpoint the tokens went to."""
    rows = (
        qs.values("team__name", "provider", "endpoint")
        .annotate(**_USAGE_SUMS)
        .order_by("team__name", "provider", "endpoint")
    )
    return [_with_total(r) for r in rows]


def team_provider_costs(by_team_provider: list[dict]) -> dict:
    """Adds ``cost`` / ``wasted_cost`` to each per-team-per-provider-per-endpoint row (in place) with the
    one cost helper (priced at the provider's prices for the row's endpoint) and returns the totals ({"cost", "wasted_cost"}; None = some price unknown)."""
    return add_usage_costs(
        (
            row,
            [
                (
                    (row["provider"], row["endpoint"]),
                    row["prompt"],
                    row["completion"],
                    row["wasted"],
                    row["cached"],
                    row["cache_write"],
                    row["batch_prompt"],
                    row["batch_completion"],
                )
            ],
        )
        for row in by_team_provider
    )


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
        .order_by("day", "team__name", "provider", "endpoint")
        .values_list(
            "day", "team__name", "provider", *USAGE_SUMS, *CACHE_SUMS, *PROVIDER_BATCH_SUMS, "endpoint"
        )
        .iterator(chunk_size=2000)
    )


def team_rate_limits(team: Team | None = None) -> list[dict]:
    """The RPM / TPM limits across providers of every team that has one (or of ``team``), with their use
    in the last minute from the shared quota store (teams.usage.rate_limits, as /api/v1/usage shows it);
    ``error`` when the store cannot be read."""
    teams = Team.objects.filter(Q(rpm_limit__isnull=False) | Q(tpm_limit__isnull=False)).order_by("name")
    rows = []
    for row in [team] if team is not None else teams:
        try:
            rows.append({"team": row.name, **rate_limits(row), "error": ""})
        except QuotaError as exc:
            rows.append({"team": row.name, "error": str(exc)})
    return rows

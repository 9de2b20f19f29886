"""The usage page's CSV export: one line per team, day and provider, streamed, with its cost (priced
per line with providers.pricing.sum_usage_costs) and spreadsheet-safe names."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from django.db.models import QuerySet

from batches.models import TeamUsageDaily
from batches.selectors import USAGE_SUMS
from providers.pricing import UNKNOWN, Prices, prices_by_provider, sum_usage_costs

from .selectors.usage import usage_csv_rows

# the detail columns of usage_csv_rows (batches.selectors.USAGE_SUMS), then what is computed from them
CSV_HEADER = ["day", "team", "provider", *USAGE_SUMS, "total_tokens", "cost", "wasted_cost"]


def csv_safe(value: str) -> str:
    """Team and provider names starting with = + - @ would be formulas in a spreadsheet."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


class _Echo:
    def write(self, value):
        return value


def csv_costs(prices: dict[str, Prices], provider: str, prompt: int, completion: int, wasted: int) -> list:
    costs = sum_usage_costs([(prices.get(provider, UNKNOWN), prompt, completion, wasted)])
    return ["" if costs[k] is None else f"{costs[k]:.6f}" for k in ("cost", "wasted_cost")]


def usage_csv_lines(qs: QuerySet[TeamUsageDaily]) -> Iterator[str]:
    """The CSV's lines (header first). The prices are read now, the rows while streaming."""
    writer = csv.writer(_Echo())
    prices = prices_by_provider()

    def lines() -> Iterator[str]:
        yield writer.writerow(CSV_HEADER)
        for day, team, provider, req, ok, failed, prompt, completion, wasted in usage_csv_rows(qs):
            yield writer.writerow(
                [
                    day.isoformat(),
                    csv_safe(team),
                    csv_safe(provider),
                    req,
                    ok,
                    failed,
                    prompt,
                    completion,
                    wasted,
                    prompt + completion,
                    *csv_costs(prices, provider, prompt, completion, wasted),
                ]
            )

    return lines()

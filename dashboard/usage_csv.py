"""The usage page's CSV export: one line per team, day, provider and endpoint, streamed, with its cost (priced
per line with providers.pricing.sum_usage_costs) and spreadsheet-safe names."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from django.db.models import QuerySet

from batches.models import TeamUsageDaily
from batches.selectors import CACHE_SUMS, PROVIDER_BATCH_SUMS, USAGE_SUMS
from providers.pricing import PriceKey, Prices, price_of, prices_by_provider, sum_usage_costs

from .selectors.usage import usage_csv_rows

# the detail columns of usage_csv_rows (batches.selectors.USAGE_SUMS), then what is computed from them,
# then the prompt-cache parts of prompt_tokens, then the provider-batch parts of the tokens and the
# real-time / provider-batch costs, then the endpoint the tokens went to (each group appended last: the
# earlier columns keep their places)
CSV_HEADER = ["day", "team", "provider", *USAGE_SUMS, "total_tokens", "cost", "wasted_cost", *CACHE_SUMS,
              *PROVIDER_BATCH_SUMS, "realtime_cost", "provider_batch_cost", "endpoint"]  # fmt: skip


def csv_safe(value: str) -> str:
    """Team and provider names starting with = + - @ would be formulas in a spreadsheet."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


class _Echo:
    def write(self, value):
        return value


COST_COLUMNS = ("cost", "wasted_cost", "realtime_cost", "provider_batch_cost")


def csv_costs(prices: dict[str, Prices], key: PriceKey, *tokens: int) -> list:
    """cost, wasted_cost, realtime_cost, provider_batch_cost of one line (``key``: its provider, or its
    provider and endpoint); ``tokens``: prompt, completion, wasted, cached, cache_write, provider-batch
    prompt, provider-batch completion."""
    costs = sum_usage_costs([(price_of(prices, key), *tokens)])
    return ["" if costs[k] is None else f"{costs[k]:.6f}" for k in COST_COLUMNS]


def usage_csv_lines(qs: QuerySet[TeamUsageDaily]) -> Iterator[str]:
    """The CSV's lines (header first). The prices are read now, the rows while streaming."""
    writer = csv.writer(_Echo())
    prices = prices_by_provider()

    def lines() -> Iterator[str]:
        yield writer.writerow(CSV_HEADER)
        for row in usage_csv_rows(qs):
            (
                day,
                team,
                provider,
                req,
                ok,
                failed,
                prompt,
                completion,
                wasted,
                cached,
                cache_write,
                bp,
                bc,
                endpoint,
            ) = row
            cost, wasted_cost, realtime_cost, batch_cost = csv_costs(
                prices, (provider, endpoint), prompt, completion, wasted, cached, cache_write, bp, bc
            )
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
                    cost,
                    wasted_cost,
                    cached,
                    cache_write,
                    bp,
                    bc,
                    realtime_cost,
                    batch_cost,
                    endpoint,
                ]
            )

    return lines()

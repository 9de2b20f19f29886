"""Token prices → cost. One place for the arithmetic used by the usage API, the usage page and CSV, the
batch stats and the ``gateway_provider_cost_total`` metric.

Prices are per million tokens (``Provider.price_prompt_per_million`` / ``price_completion_per_million``);
an unknown price (empty) makes the cost unknown (``None``), never zero.

Wasted tokens (billed for attempts whose answer was not used, ``retry_extra_tokens``) are priced per
prompt/completion split when the split is known (batch stats, from the attempt log). The daily usage
table keeps only their sum; there they are priced at the prompt price, a lower bound (documented in
docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class Prices:
    prompt_per_million: Decimal | None
    completion_per_million: Decimal | None
    # prompt-cache reads and writes (parts of prompt_tokens); None: priced at the prompt price
    cached_per_million: Decimal | None = None
    cache_write_per_million: Decimal | None = None

    @property
    def known(self) -> bool:
        return self.prompt_per_million is not None and self.completion_per_million is not None

    @classmethod
    def of(cls, provider) -> Prices:
        return cls(provider.price_prompt_per_million, provider.price_completion_per_million)


UNKNOWN = Prices(None, None)

# (provider name, prompt, completion, wasted, cached, cache-write tokens) of one usage row
ProviderTokens = tuple[str, int, int, int, int, int]


def token_cost(
    prices: Prices,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> Decimal | None:
    """Cost of the given tokens, or None when a needed price is unknown (zero tokens need no price).
    ``prompt_tokens`` is all input: its cached and cache-write parts are priced at their own prices
    (the prompt price when those are not set)."""
    cached, cache_write = int(cached_tokens or 0), int(cache_write_tokens or 0)
    total = Decimal(0)
    for tokens, price in (
        (max(0, int(prompt_tokens) - cached - cache_write), prices.prompt_per_million),
        (cached, _or(prices.cached_per_million, prices.prompt_per_million)),
        (cache_write, _or(prices.cache_write_per_million, prices.prompt_per_million)),
        (completion_tokens, prices.completion_per_million),
    ):
        if not tokens:
            continue
        if price is None:
            return None
        total += Decimal(int(tokens)) * Decimal(price) / MILLION
    return total


def _or(price: Decimal | None, fallback: Decimal | None) -> Decimal | None:
    return fallback if price is None else price


def as_number(cost: Decimal | None) -> float | None:
    """For JSON: rounded to a millionth of the currency unit; None stays None."""
    return None if cost is None else float(cost.quantize(COST_PLACES))


def add_costs(*costs: Decimal | None) -> Decimal | None:
    """Sum; unknown if any part is unknown."""
    total = Decimal(0)
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total


def sum_usage_costs(parts) -> dict:
    """{"cost", "wasted_cost"} of usage rows given as (Prices, prompt, completion, wasted, cached,
    cache_write) tuples; wasted tokens are priced at the prompt price (the rows have no split).
    ``cost`` includes ``wasted_cost``."""
    cost: Decimal | None = Decimal(0)
    wasted_cost: Decimal | None = Decimal(0)
    for prices, prompt, completion, wasted, cached, cache_write in parts:
        waste = token_cost(Prices(prices.prompt_per_million, prices.prompt_per_million), wasted, 0)
        cost = add_costs(cost, token_cost(prices, prompt, completion, cached, cache_write), waste)
        wasted_cost = add_costs(wasted_cost, waste)
    return {"cost": as_number(cost), "wasted_cost": as_number(wasted_cost)}


def prices_by_provider() -> dict[str, Prices]:
    """Every provider's prices by name (one query)."""
    from providers.models import Provider

    return {
        name: Prices(pp, pc)
        for name, pp, pc in Provider.objects.values_list(
            "name", "price_prompt_per_million", "price_completion_per_million"
        )
    }


def add_usage_costs(rows_with_usage: Iterable[tuple[dict, Iterable[ProviderTokens]]]) -> dict:
    """The one cost helper of the usage readers (the usage API and the dashboard's usage page): adds
    ``cost`` / ``wasted_cost`` to each usage row, priced from that row's per-provider tokens, and returns
    the totals over every row ({"cost", "wasted_cost"}; None = some price unknown). One query for the
    prices. ``rows_with_usage``: (row, [(provider, prompt, completion, wasted, cached, cache_write),
    ...]) pairs."""
    prices = prices_by_provider()
    every = []
    for row, usage in rows_with_usage:
        parts = [(prices.get(provider, UNKNOWN), *tokens) for provider, *tokens in usage]
        row.update(sum_usage_costs(parts))
        every.extend(parts)
    return sum_usage_costs(every)


def add_stats_costs(stats: dict, prices: dict[str, Prices]) -> dict:
    """Adds ``cost`` and ``wasted_cost`` next to the tokens of batch stats (docs/contract.md §4 shape, in place):
    per provider and in ``token_usage``. ``cost`` includes ``wasted_cost``; unknown price → None."""
    total_cost: Decimal | None = Decimal(0)
    total_wasted: Decimal | None = Decimal(0)
    for name, p in stats.get("providers", {}).items():
        price = prices.get(name, UNKNOWN)
        used = token_cost(
            price,
            p.get("prompt_tokens", 0),
            p.get("completion_tokens", 0),
            p.get("cached_tokens", 0),
            p.get("cache_write_tokens", 0),
        )
        wasted = token_cost(
            Prices(price.prompt_per_million, price.prompt_per_million), p.get("retry_extra_tokens", 0), 0
        )
        cost = add_costs(used, wasted)
        p["cost"], p["wasted_cost"] = as_number(cost), as_number(wasted)
        total_cost, total_wasted = add_costs(total_cost, cost), add_costs(total_wasted, wasted)
    usage = stats.setdefault("token_usage", {})
    usage["cost"], usage["wasted_cost"] = as_number(total_cost), as_number(total_wasted)
    return stats

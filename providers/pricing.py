"""Token prices → cost. One place for the arithmetic used by the usage API, the usage page and CSV, the
batch stats and the ``gateway_provider_cost_total`` metric.

Prices are per million tokens (``Provider.price_prompt_per_million`` / ``price_completion_per_million``);
an unknown price (empty) makes the cost unknown (``None``), never zero.

Prompt caching (issue #21): ``prompt_tokens`` counts ALL input, cached reads and cache writes included
(gateway_engine.wire.USAGE_KEYS). ``token_cost(..., cached_tokens=, cache_write_tokens=)`` prices the
cached reads at ``price_cached_prompt_per_million`` and the cache writes at
``price_cache_write_per_million``, the rest of the prompt at the prompt price; an empty cached or
cache-write price means "same as the prompt price" (the provider bills them like any input), not unknown.

Embeddings (issue #39) bill input tokens only, at the provider's embedding price
(``price_embedding_per_million``; empty = the prompt price, as an OpenAI-compatible provider serving an
embedding model is priced): ``Prices.for_endpoint("embeddings")`` is the price list its tokens are
priced with, the other endpoints (chat, responses, messages) use the provider's chat prices. A usage
part names its prices by provider or by ``(provider, endpoint)`` (``price_of``).

Wasted tokens (billed for attempts whose answer was not used, ``retry_extra_tokens``) are priced per
prompt/completion split when the split is known (batch stats, from the attempt log). The daily usage
table keeps only their sum; there they are priced at the prompt price, a lower bound (documented in
docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal

from gateway_engine.endpoints import EMBEDDINGS

MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class Prices:
    prompt_per_million: Decimal | None
    completion_per_million: Decimal | None
    # None: priced as prompt tokens (see the module docstring)
    cached_per_million: Decimal | None = None
    cache_write_per_million: Decimal | None = None
    # provider-batch work costs this share of the real-time price (Provider.batch_price_factor)
    batch_price_factor: float = 0.5
    # embedding requests' input tokens (None: the prompt price)
    embedding_per_million: Decimal | None = None

    @property
    def known(self) -> bool:
        return self.prompt_per_million is not None and self.completion_per_million is not None

    @property
    def cached_price(self) -> Decimal | None:
        """Per million cache-read prompt tokens: the cached price, else the prompt price."""
        return _first_set(self.cached_per_million, self.prompt_per_million)

    @property
    def cache_write_price(self) -> Decimal | None:
        """Per million prompt tokens written to the cache: the cache-write price, else the prompt price."""
        return _first_set(self.cache_write_per_million, self.prompt_per_million)

    @classmethod
    def of(cls, provider) -> Prices:
        return cls(
            provider.price_prompt_per_million,
            provider.price_completion_per_million,
            provider.price_cached_prompt_per_million,
            provider.price_cache_write_per_million,
            float(provider.batch_price_factor),
            provider.price_embedding_per_million,
        )

    def for_endpoint(self, endpoint: str) -> Prices:
        """The prices tokens of ``endpoint`` are billed at: an embedding request's input at the
        embedding price (else the prompt price; no cache prices apply), every other endpoint's at these."""
        if endpoint != EMBEDDINGS:
            return self
        price = _first_set(self.embedding_per_million, self.prompt_per_million)
        return replace(self, prompt_per_million=price, cached_per_million=None, cache_write_per_million=None)


def _first_set(*prices: Decimal | None) -> Decimal | None:
    return next((price for price in prices if price is not None), None)


UNKNOWN = Prices(None, None)


# (provider name, prompt tokens, completion tokens, wasted tokens[, cached tokens, cache-write tokens[,
# provider-batch prompt tokens, provider-batch completion tokens]]) of one usage row; the provider-batch
# parts are parts of prompt/completion
PriceKey = str | tuple[str, str]  # a provider (its chat prices) or (provider, endpoint)
ProviderTokens = (
    tuple[PriceKey, int, int, int]
    | tuple[PriceKey, int, int, int, int, int]
    | tuple[PriceKey, int, int, int, int, int, int, int]
)


def price_of(prices: dict[str, Prices], key: PriceKey) -> Prices:
    """The prices of a usage part named by provider (its chat prices) or by (provider, endpoint)."""
    if isinstance(key, tuple):
        provider, endpoint = key
        return prices.get(provider, UNKNOWN).for_endpoint(endpoint)
    return prices.get(key, UNKNOWN)


def token_cost(
    prices: Prices,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> Decimal | None:
    """Cost of the given tokens, or None when a needed price is unknown (zero tokens need no price).

    ``prompt_tokens`` is all input; ``cached_tokens`` (cache reads) and ``cache_write_tokens`` are the
    parts of it billed at their own prices: cost = (prompt - cached - cache_write) x prompt price +
    cached x cached price + cache_write x cache-write price + completion x completion price. Parts
    larger than the prompt (a provider's inconsistent usage) leave no uncached part, never a negative one.
    """
    cached, written = max(0, int(cached_tokens or 0)), max(0, int(cache_write_tokens or 0))
    uncached = max(0, int(prompt_tokens or 0) - cached - written)
    total = Decimal(0)
    for tokens, price in (
        (uncached, prices.prompt_per_million),
        (cached, prices.cached_price),
        (written, prices.cache_write_price),
        (completion_tokens, prices.completion_per_million),
    ):
        if not tokens:
            continue
        if price is None:
            return None
        total += Decimal(int(tokens)) * Decimal(price) / MILLION
    return total


def provider_batch_cost(prices: Prices, prompt_tokens: int, completion_tokens: int) -> Decimal | None:
    """Cost of tokens served through the provider's own batch API: ``batch_price_factor`` × the
    real-time price of the same usage (docs/provider_batches.md)."""
    realtime = token_cost(prices, prompt_tokens, completion_tokens)
    return None if realtime is None else realtime * Decimal(str(prices.batch_price_factor))


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
    """{"cost", "wasted_cost", "realtime_cost", "provider_batch_cost"} of usage rows given as (Prices,
    prompt, completion, wasted[, cached, cache_write[, batch_prompt, batch_completion]]) tuples. The
    provider-batch parts of prompt/completion are priced with ``provider_batch_cost`` (the batch
    discount, as the batch stats price them), the rest at the real-time price (cached reads and writes
    there); wasted tokens at the prompt price (the rows have no split). ``cost`` = real-time +
    provider-batch + wasted."""
    realtime: Decimal | None = Decimal(0)
    batched: Decimal | None = Decimal(0)
    wasted_cost: Decimal | None = Decimal(0)
    for prices, prompt, completion, wasted, *rest in parts:
        cached, written, b_prompt, b_completion = (list(rest) + [0, 0, 0, 0])[:4]
        waste = token_cost(Prices(prices.prompt_per_million, prices.prompt_per_million), wasted, 0)
        used = token_cost(
            prices,
            max(0, prompt - b_prompt),
            max(0, completion - b_completion),
            cached_tokens=cached,
            cache_write_tokens=written,
        )
        realtime = add_costs(realtime, used)
        batched = add_costs(batched, provider_batch_cost(prices, b_prompt, b_completion))
        wasted_cost = add_costs(wasted_cost, waste)
    return {
        "cost": as_number(add_costs(realtime, batched, wasted_cost)),
        "wasted_cost": as_number(wasted_cost),
        "realtime_cost": as_number(realtime),
        "provider_batch_cost": as_number(batched),
    }


def prices_by_provider() -> dict[str, Prices]:
    """Every provider's prices by name (one query)."""
    from providers.models import Provider

    return {
        name: Prices(*prices)
        for name, *prices in Provider.objects.values_list(
            "name",
            "price_prompt_per_million",
            "price_completion_per_million",
            "price_cached_prompt_per_million",
            "price_cache_write_per_million",
            "batch_price_factor",
            "price_embedding_per_million",
        )
    }


def add_usage_costs(rows_with_usage: Iterable[tuple[dict, Iterable[ProviderTokens]]]) -> dict:
    """The one cost helper of the usage readers (the usage API and the dashboard's usage page): adds
    ``cost`` / ``wasted_cost`` to each usage row, priced from that row's per-provider tokens, and returns
    the totals over every row ({"cost", "wasted_cost"}; None = some price unknown). One query for the
    prices. ``rows_with_usage``: (row, [(provider, prompt, completion, wasted[, cached, cache_write]),
    ...]) pairs; ``provider`` may be a (provider, endpoint) pair (``price_of``)."""
    prices = prices_by_provider()
    every = []
    for row, usage in rows_with_usage:
        parts = [
            (price_of(prices, provider), prompt, completion, wasted, *cache)
            for provider, prompt, completion, wasted, *cache in usage
        ]
        row.update(sum_usage_costs(parts))
        every.extend(parts)
    return sum_usage_costs(every)


def add_stats_costs(stats: dict, prices: dict[str, Prices], endpoint: str = "chat") -> dict:
    """Adds ``cost`` and ``wasted_cost`` next to the tokens of batch stats (docs/contract.md §4 shape, in place):
    per provider and in ``token_usage``, at the providers' prices for ``endpoint``. ``cost`` includes
    ``wasted_cost``; unknown price → None."""
    total_cost: Decimal | None = Decimal(0)
    total_wasted: Decimal | None = Decimal(0)
    saved: Decimal | None = Decimal(0)
    any_batched = False
    for name, p in stats.get("providers", {}).items():
        price = price_of(prices, (name, endpoint))
        batched = p.get("provider_batch") or {}
        b_prompt, b_completion = (
            int(batched.get("prompt_tokens", 0)),
            int(batched.get("completion_tokens", 0)),
        )
        used = token_cost(
            price,
            max(0, p.get("prompt_tokens", 0) - b_prompt),
            max(0, p.get("completion_tokens", 0) - b_completion),
            cached_tokens=p.get("cached_tokens", 0),
            cache_write_tokens=p.get("cache_write_tokens", 0),
        )
        if batched:
            any_batched = True
            b_cost = provider_batch_cost(price, b_prompt, b_completion)
            b_full = token_cost(price, b_prompt, b_completion)
            b_saved = None if b_cost is None or b_full is None else b_full - b_cost
            batched["cost"], batched["realtime_cost"] = as_number(b_cost), as_number(b_full)
            batched["saved_vs_realtime"] = as_number(b_saved)
            used, saved = add_costs(used, b_cost), add_costs(saved, b_saved)
        wasted = token_cost(
            Prices(price.prompt_per_million, price.prompt_per_million), p.get("retry_extra_tokens", 0), 0
        )
        cost = add_costs(used, wasted)
        p["cost"], p["wasted_cost"] = as_number(cost), as_number(wasted)
        total_cost, total_wasted = add_costs(total_cost, cost), add_costs(total_wasted, wasted)
    usage = stats.setdefault("token_usage", {})
    usage["cost"], usage["wasted_cost"] = as_number(total_cost), as_number(total_wasted)
    if any_batched:
        usage["saved_vs_realtime"] = as_number(saved)
    return stats

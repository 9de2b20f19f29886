"""A batch's stats from its stored items (the contract's ``stats`` object, docs/contract.md §4), priced,
with the tokens per endpoint (``stats["endpoints"]``, gateway_engine.endpoints: chat, embeddings,
responses): the finalizer's, the progress snapshots' and the late-usage count's one reader.

``stats["endpoints"][endpoint]`` has the shape of the whole stats (``success_count``, ``failed_count``,
``providers`` with the same per-provider numbers, ``token_usage`` with ``cost``) for that endpoint's
items only: TeamUsageDaily's rows are written per (provider, endpoint) from it, and each endpoint's
tokens are priced at the provider's price for that endpoint (providers.pricing.Prices.for_endpoint:
embeddings have their own). The top-level numbers are the sums over every endpoint, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from batches.models import Batch, BatchItem
from gateway_engine.endpoints import CHAT
from gateway_engine.stats import StatsBuilder
from providers.pricing import Prices, add_costs, add_stats_costs, prices_by_provider

from .steps import add_earlier_steps

# An item answered by the response cache (or by an identical item's answer): ``cache_hits`` in the stats
CACHE_HIT = "cache"
# The prompt-cache counts of the stats (parts of prompt_tokens), per provider and in token_usage.
CACHE_KEYS = ("cached_tokens", "cache_write_tokens")
PROVIDER_BATCH = "provider_batch"  # an attempt-log entry's ``served_by`` for a provider-batch line
STATS_COLUMNS = (
    "status",
    "provider",
    "attempt_log",
    "prompt_tokens",
    "completion_tokens",
    *CACHE_KEYS,
    "served_by",
    "endpoint",
)


@dataclass
class _Part:
    """What the items of one endpoint (or of all of them) add up to."""

    builder: StatsBuilder = field(default_factory=StatsBuilder)
    cache: dict[str, list[int]] = field(default_factory=dict)  # provider → [cached, cache_write]
    batched: dict[str, dict[str, int]] = field(default_factory=dict)  # provider → provider-batch lines
    total: int = 0
    hits: int = 0

    def add(self, status, provider, attempt_log, prompt, completion, cached, cache_write, served_by) -> None:
        self.total += 1
        if served_by == CACHE_HIT:  # no call, nothing billed: counted as a hit, no provider's tokens
            self.hits += 1
            self.builder.add_item(status, attempt_log)
            return
        count_provider_batch_lines(attempt_log, self.batched)
        self.builder.add_item(
            status, attempt_log, provider=provider, prompt_tokens=prompt, completion_tokens=completion
        )
        if cached or cache_write:
            counts = self.cache.setdefault(provider, [0, 0])
            counts[0] += cached or 0
            counts[1] += cache_write or 0

    def stats(self, batch_id: str, task_total: int, elapsed_ms: int, api_calls: int) -> dict[str, Any]:
        stats = with_cache_tokens(self.builder.build(batch_id, task_total, elapsed_ms), self.cache)
        stats["cache_hits"] = self.hits
        return with_provider_batch(stats, self.batched, api_calls)


def batch_stats(batch: Batch, elapsed_ms: int, item_ids=None) -> tuple[dict, StatsBuilder]:
    """The stats of the batch's items (``item_ids``: of those only), priced per endpoint. One pass over
    the items when they are of one endpoint (the common case: that endpoint's part is the whole); a
    batch of several endpoints reads them once more for the whole."""
    items = BatchItem.objects.filter(batch_id=batch.id)
    if item_ids is not None:
        items = items.filter(id__in=list(item_ids))
    parts: dict[str, _Part] = {}
    for *row, endpoint in items.values_list(*STATS_COLUMNS).iterator(chunk_size=2000):
        part = parts.get(endpoint)
        if part is None:
            part = parts[endpoint] = _Part()
        part.add(*row)
    if len(parts) == 1:
        whole = next(iter(parts.values()))
    else:
        whole = _Part()
        for *row, _endpoint in items.values_list(*STATS_COLUMNS).iterator(chunk_size=2000):
            whole.add(*row)
    add_earlier_steps(whole.builder, batch, item_ids)  # pipelines: the steps before each item's current one
    batch_id = str(batch.id)
    stats = whole.stats(batch_id, batch.total_count or whole.total, elapsed_ms, batch.batch_api_calls)
    prices = prices_by_provider()
    by_endpoint = {
        endpoint: add_stats_costs(part.stats(batch_id, part.total, elapsed_ms, 0), prices, endpoint=endpoint)
        for endpoint, part in sorted(parts.items())
    }
    stats["endpoints"] = {endpoint: _endpoint_view(s) for endpoint, s in by_endpoint.items()}
    return priced(stats, by_endpoint, prices), whole.builder


def _endpoint_view(stats: dict[str, Any]) -> dict[str, Any]:
    """One endpoint's part of the stats: its counts, per-provider numbers and priced token usage."""
    keep = ("success_count", "failed_count", "cache_hits", "providers", "token_usage")
    return {key: stats[key] for key in keep if key in stats}


def priced(stats: dict, by_endpoint: dict[str, dict], prices: dict[str, Prices]) -> dict:
    """The whole batch's costs: one endpoint's prices when it has one (the common case), else each
    provider's and the total cost summed over the endpoints' (each priced at its own prices)."""
    if len(by_endpoint) <= 1:
        return add_stats_costs(stats, prices, endpoint=next(iter(by_endpoint), CHAT))
    add_stats_costs(stats, prices)  # every other priced field (provider-batch savings), then the sums
    total: dict[str, Decimal | None] = {"cost": Decimal(0), "wasted_cost": Decimal(0)}
    for name, p in stats.get("providers", {}).items():
        for key in total:
            parts = [s["providers"].get(name, {}).get(key, 0) for s in by_endpoint.values()]
            value = None if None in parts else sum(Decimal(str(v)) for v in parts)
            p[key] = None if value is None else float(value)
            total[key] = add_costs(total[key], value)
    for key, value in total.items():
        stats["token_usage"][key] = None if value is None else float(value)
    return stats


def count_provider_batch_lines(attempt_log, batched: dict[str, dict[str, int]]) -> None:
    """Adds one item's provider-batch lines (attempt-log entries ``served_by: provider_batch``) and the
    tokens of the one whose answer was used, per provider."""
    for attempt in attempt_log or ():
        if attempt.get("served_by") != PROVIDER_BATCH:
            continue
        row = batched.setdefault(
            attempt.get("provider") or "?", {"request_count": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        row["request_count"] += 1
        if attempt.get("used"):
            row["prompt_tokens"] += int(attempt.get("prompt_tokens") or 0)
            row["completion_tokens"] += int(attempt.get("completion_tokens") or 0)


def with_provider_batch(stats: dict, batched: dict[str, dict[str, int]], api_calls: int) -> dict:
    """The provider-batch part of the stats (docs/provider_batches.md): per provider
    ``provider_batch`` {request_count (lines, also in the provider's request_count), prompt_tokens,
    completion_tokens} (priced by add_stats_costs), and ``batch_api_calls`` (the batch-API HTTP calls,
    which are no item's requests). Nothing is added for a batch that used no provider batch."""
    if not batched and not api_calls:
        return stats
    for name, row in batched.items():
        if name in stats.get("providers", {}):
            stats["providers"][name][PROVIDER_BATCH] = dict(row)
    stats["batch_api_calls"] = int(api_calls)
    return stats


def with_cache_tokens(stats: dict, cache: dict[str, list[int]]) -> dict:
    """Adds ``cached_tokens`` / ``cache_write_tokens`` (0 when none) beside the prompt tokens of every
    provider and of ``token_usage``, counted from the items' stored answers like their prompt tokens
    (the answer that became the item's result: its provider is the item's). In place; returns stats."""
    usage = stats.setdefault("token_usage", {})
    for key in CACHE_KEYS:
        usage[key] = 0
    for name, p in stats.get("providers", {}).items():
        cached, cache_write = cache.get(name, (0, 0))
        p["cached_tokens"], p["cache_write_tokens"] = cached, cache_write
    for cached, cache_write in cache.values():
        usage["cached_tokens"] += cached
        usage["cache_write_tokens"] += cache_write
    return stats

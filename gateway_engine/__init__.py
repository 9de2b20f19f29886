"""The asyncio execution engine (no ORM): batcher, HTTP, retry policy, stats.

from gateway_engine import CrossProviderBatcher
results = CrossProviderBatcher.from_config(provider_file_dict).batch(items)
"""

from .batcher import (
    CrossProviderBatcher,
    EngineOptions,
    ItemFeed,
    ItemResult,
    RunControl,
    WorkItem,
    estimate_tokens,
)
from .retry import RetryPolicy
from .stats import build_stats

__all__ = [
    "CrossProviderBatcher",
    "EngineOptions",
    "ItemFeed",
    "ItemResult",
    "RetryPolicy",
    "RunControl",
    "WorkItem",
    "build_stats",
    "estimate_tokens",
]

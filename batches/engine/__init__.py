"""The asyncio execution engine (no ORM): batcher, HTTP, retry policy, stats.

from batches.engine import CrossProviderBatcher
results = CrossProviderBatcher.from_config(provider_file_dict).batch(items)
"""

from .batcher import CrossProviderBatcher, EngineOptions, ItemResult, WorkItem, estimate_tokens
from .retry import RetryPolicy
from .stats import build_stats

__all__ = [
    "CrossProviderBatcher",
    "EngineOptions",
    "ItemResult",
    "RetryPolicy",
    "WorkItem",
    "build_stats",
    "estimate_tokens",
]

"""The asyncio execution engine, Django-free (tests/engine/test_boundary.py): the batcher facade and its
parts (admission, attempts, outcomes, queues, feed, stopping, outage), HTTP, retry policy, routing, quota
stores (gateway_engine.quota), circuit breaker, stats.

    from gateway_engine import CrossProviderBatcher
    results = CrossProviderBatcher.from_config(provider_file_dict).batch(items)

What the engine needs from outside (quota store, breaker, live limits, item feed, result callback,
clock) is typed in gateway_engine.protocols; its tunables are the fields of EngineOptions. The gateway
wires both from Django in batches.execution.engine_wiring (build_batcher, engine_options).
"""

from .batcher import CrossProviderBatcher
from .feed import ItemFeed
from .items import ItemResult, RetryState, WorkItem, estimate_tokens
from .options import EngineOptions
from .retry import RetryPolicy
from .stats import build_stats
from .stopping import RunControl

__all__ = [
    "CrossProviderBatcher",
    "EngineOptions",
    "ItemFeed",
    "ItemResult",
    "RetryPolicy",
    "RetryState",
    "RunControl",
    "WorkItem",
    "build_stats",
    "estimate_tokens",
]

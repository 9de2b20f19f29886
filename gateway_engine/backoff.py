"""Capped exponential growth, the one formula behind every "wait longer each time" of the gateway: the
retry backoff's ceiling (retry.py, full jitter under it), the breaker's doubling cooldown (breaker.py; its
Lua copy in breaker_redis.py is held to it by the backend-parametrized tests/engine/test_breaker.py), the
webhook redelivery wait (webhooks/worker.py) and the provider-batch poll interval
(provider_batches/lifecycle.py). A value type's helper: imports nothing."""

from __future__ import annotations

MAX_STEP = 64  # beyond this every sane cap is reached long before; keeps factor ** step a finite float


def capped_exponential(base: float, cap: float, step: int, factor: float = 2.0) -> float:
    """``base × factor^step``, at most ``cap``; a negative ``step`` counts as 0."""
    return min(cap, base * factor ** min(max(0, step), MAX_STEP))

"""Capped exponential growth, the one formula behind every "wait longer each time" of the gateway: the
retry backoff (retry.py: full jitter under the ceiling), the breaker's doubling cooldown (breaker.py; the
Lua breaker in breaker_redis.py is handed the ladder this module computes, it has no formula of its own),
the outage ride-through's waits (outage.py), the lease and in-flight slot polls (quota/leases.py, quota/slots.py), the webhook redelivery wait (webhooks/worker.py), the
provider-batch poll interval (provider_batches/lifecycle.py) and the config listener's reconnects
(providers/limits/source.py).

The retry backoff differs per error type as data: each row of the error-kind table
(gateway_engine/error_kinds.py) names one of ``BACKOFF_POLICIES``, which scale the configured base and
cap (``GATEWAY_RETRY_BASE_SECONDS`` / ``GATEWAY_RETRY_CAP_SECONDS``): a provider-wide overload (an
Anthropic 529) backs off longer than a 5xx of one call. A value type's helper: imports nothing."""

from __future__ import annotations

import random
from dataclasses import dataclass

MAX_STEP = 64  # beyond this every sane cap is reached long before; keeps factor ** step a finite float


def capped_exponential(base: float, cap: float, step: int, factor: float = 2.0) -> float:
    """``base × factor^step``, at most ``cap``; a negative ``step`` counts as 0."""
    return min(cap, base * factor ** min(max(0, step), MAX_STEP))


def full_jitter(ceiling: float, rng: random.Random | None = None) -> float:
    """A uniform draw in [0, ceiling] ("full jitter": retries of many items spread over the window)."""
    return random.uniform(0.0, ceiling) if rng is None else rng.uniform(0.0, ceiling)


def ladder(base: float, cap: float, factor: float = 2.0) -> tuple[float, ...]:
    """Every value of the growth from step 0 up to and including the first one at the cap (at most
    MAX_STEP + 1 values): what a caller that cannot run this module (the breaker's Lua) indexes."""
    values = [capped_exponential(base, cap, 0, factor)]
    while values[-1] < cap and len(values) <= MAX_STEP:
        values.append(capped_exponential(base, cap, len(values), factor))
    return tuple(values)


@dataclass(frozen=True)
class BackoffPolicy:
    """How one error type's retries back off, relative to the configured base and cap (``scale`` 1 is
    them as configured). ``retries`` False: the error type is never retried (its row's ``retryable``
    is False too; tests/architecture/test_error_tables.py holds the two together).
    ``yields_to_breaker``: when the failure leaves (or finds) the provider's breaker open, the breaker's
    cooldown is the wait and the backoff is skipped — for a provider-wide condition (an overload), where
    the breaker and the backoff would otherwise both act on the same answers. A call's own failure keeps
    its backoff under an open breaker: it spreads the retries of many failing items, so the item that
    asks for the breaker's probe is more often one that has not failed there."""

    base_scale: float = 1.0
    cap_scale: float = 1.0
    factor: float = 2.0
    retries: bool = True
    yields_to_breaker: bool = False

    def ceiling(self, base: float, cap: float, retry_index: int) -> float:
        """The largest wait before retry ``retry_index`` (0-based) under this policy."""
        return capped_exponential(base * self.base_scale, cap * self.cap_scale, retry_index, self.factor)


STANDARD = "standard"
PROVIDER_OVERLOAD = "provider_overload"
NEVER = "never"

BACKOFF_POLICIES: dict[str, BackoffPolicy] = {
    # a call's own failure (a 5xx, a timeout, a cut connection, an unreadable answer) or a 429 without
    # a believable Retry-After: the configured backoff
    STANDARD: BackoffPolicy(),
    # the provider is overloaded for every customer (Anthropic 529, Gemini 503 UNAVAILABLE): it needs
    # longer to recover than one call's 5xx, so the retries start 4× later and may wait twice the cap;
    # with its breaker open, the breaker's cooldown is the only wait
    PROVIDER_OVERLOAD: BackoffPolicy(base_scale=4.0, cap_scale=2.0, yields_to_breaker=True),
    NEVER: BackoffPolicy(base_scale=0.0, cap_scale=0.0, retries=False),
}

"""``EngineOptions``: every tunable the engine reads, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

from .http import DEFAULT_MAX_ANSWER_BYTES
from .retry import RetryPolicy

__all__ = ["EngineOptions"]


@dataclass(frozen=True)
class EngineOptions:
    """Every tunable the engine reads (the stores and breakers take theirs in their constructors; the
    engine reads no settings or environment). The gateway builds it from Django settings in one place:
    batches.execution.engine_wiring.engine_options."""

    default_max_tokens: int = 256
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # an item whose every candidate is open waits at most this long (measured, summed over its life)
    # for a breaker to let it through; then it ends (sent before: its last error; never sent: no_provider)
    max_breaker_wait_seconds: float = 120.0
    # a provider answer larger than this (decompressed) is refused as invalid_response
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    # items estimated above this many tokens use the long lane (at most long_lane_share of the slots)
    long_item_tokens: int = 1024
    long_lane_share: float = 0.75
    # per preferred provider, how many items may be between "routed" and "done" at once
    provider_workers_min: int = 8
    provider_workers_factor: int = 2
    seed: int | None = None
    # quota store / breaker unreachable (Redis down): items pause and retry with backoff for at most
    # this long before the run fails (0 = fail at once); the backoff starts at store_retry_min_seconds
    # and doubles up to store_retry_max_seconds
    store_outage_seconds: float = 0.0
    store_retry_min_seconds: float = 0.2
    store_retry_max_seconds: float = 2.0
    # a half-open probe's permit lasts the provider's timeout plus this (a crashed prober can't wedge it)
    breaker_probe_grace_seconds: float = 5.0

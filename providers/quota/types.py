"""The quota engine's public types: what the execution engine and dashboards program against.

Contract between the quota engine (providers/quota/*) and its callers:

    store = get_quota_store()                     # providers.quota (Redis or in-process, by settings)
    res = await store.acquire(limits, tokens)     # waits locally until BOTH the RPM bucket (1) and the
                                                  # TPM bucket (tokens) grant; raises QuotaImpossible
                                                  # if tokens can never fit, QuotaStoreUnavailable if
                                                  # Redis is down in shared mode
    async with store.lease(limits) as lease:      # per-provider concurrency slot, acquired only AFTER
        ...send the request...                    # the bucket grant; heartbeats while held
    lease = await store.try_lease(limits)         # no-wait variant (the engine): None if all slots are
                                                  # busy -> await store.release(limits, res) (give the
                                                  # grant back), await store.wait_for_lease(limits),
                                                  # then acquire again: no idle token holders
    await store.reconcile(limits, res, actual)    # refund or charge the difference to the TPM bucket
    await store.penalize(limits, retry_after_s)   # a 429 with Retry-After: pause every worker
    state = await store.snapshot(limits)          # ProviderQuotaState for dashboards and metrics
"""

from __future__ import annotations

from dataclasses import dataclass


class QuotaError(Exception):
    pass


class QuotaImpossible(QuotaError):
    """The request needs more tokens than the provider's TPM bucket can ever hold."""

    def __init__(self, provider: str, tokens: int, capacity: float):
        self.provider, self.tokens, self.capacity = provider, tokens, capacity
        super().__init__(
            f"provider {provider}: request needs ~{tokens} tokens but the TPM bucket holds at most "
            f"{int(capacity)} (tpm × burst_seconds / 60); lower max_tokens or raise the provider's tpm/burst"
        )


class QuotaStoreUnavailable(QuotaError):
    """The shared quota store (Redis) cannot be reached. Never silently replaced by a local limiter."""


@dataclass(frozen=True)
class ProviderLimits:
    name: str
    rpm: int
    tpm: int
    burst_seconds: float
    max_concurrency: int
    timeout_seconds: float
    # Extra lifetime of a concurrency lease beyond the provider's timeout (tests shorten it).
    lease_grace_seconds: float = 10.0

    def __post_init__(self) -> None:
        for field_name in ("rpm", "tpm", "max_concurrency"):
            if getattr(self, field_name) < 1:
                raise ValueError(f"ProviderLimits({self.name!r}).{field_name} must be >= 1")
        for field_name in ("burst_seconds", "timeout_seconds"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"ProviderLimits({self.name!r}).{field_name} must be > 0")

    @property
    def rpm_per_ms(self) -> float:
        return self.rpm / 60_000.0

    @property
    def tpm_per_ms(self) -> float:
        return self.tpm / 60_000.0

    @property
    def rpm_capacity(self) -> float:
        return max(1.0, self.rpm / 60.0 * self.burst_seconds)

    @property
    def tpm_capacity(self) -> float:
        return max(1.0, self.tpm / 60.0 * self.burst_seconds)

    @property
    def lease_ttl_seconds(self) -> float:
        """A lease outlives the longest legitimate call; a dead holder's slot returns after this."""
        return self.timeout_seconds + self.lease_grace_seconds

    @classmethod
    def from_provider(cls, provider) -> ProviderLimits:
        return cls(
            name=provider.name,
            rpm=provider.rpm,
            tpm=provider.tpm,
            burst_seconds=float(provider.burst_seconds),
            max_concurrency=provider.max_concurrency,
            timeout_seconds=float(provider.timeout_seconds),
        )


@dataclass(frozen=True)
class Reservation:
    provider: str
    tokens: int


@dataclass(frozen=True)
class Decision:
    """One non-blocking attempt at the buckets (store.try_acquire)."""

    granted: bool
    wait_ms: int  # 0 when granted; else ms until both buckets (and any 429 pause) would allow
    now_ms: float  # the store's clock at the decision (Redis server TIME, or time.monotonic locally)
    impossible: bool = False  # tokens > TPM capacity: waiting will never help


@dataclass(frozen=True)
class ProviderQuotaState:
    provider: str
    rpm_tokens_available: float
    rpm_capacity: float
    tpm_tokens_available: float
    tpm_capacity: float
    wait_ms: int  # until one request of 1 token would be granted (includes 429 penalties)
    paused_until_ms: int  # 0 unless a Retry-After pushed the bucket forward
    leases_in_flight: int
    max_concurrency: int
    configured_rpm: int
    configured_tpm: int
    observed_rpm: int  # grants in the last 60 s
    observed_tpm: int  # tokens granted in the last 60 s

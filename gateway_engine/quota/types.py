"""The quota engine's public types: what the execution engine and dashboards program against.

Contract between the quota engine (gateway_engine/quota/*) and its callers:

    store = RedisQuotaStore(url, prefix="bgw:")   # or LocalQuotaStore() in one process (the gateway's
                                                  # process-wide one: providers.limits.get_quota_store())
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

The subset the execution engine calls is typed as gateway_engine.protocols.QuotaStore.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ..errors import ApplicationError, LimitExceeded, Unavailable
from .team_quota import TeamQuota

# which traffic an ask belongs to: batch asks yield to interactive callers waiting for the same provider
# (docs/engine.md, "Interactive first")
Lane: TypeAlias = Literal["batch", "interactive"]
LANES: tuple[Lane, ...] = ("batch", "interactive")

# the key (after the store prefix) of the shared provider-config version, bumped on every change
CONFIG_VERSION_KEY = "config:version"


class QuotaError(ApplicationError):
    """A quota refuses the request or cannot be checked."""

    status = 429
    code = "quota_refused"


# what each token bucket a request can overflow holds, and what to change (QuotaImpossible's message)
_BUCKET_WORDS = {
    "TPM": ("tokens", "tpm", "lower max_tokens or raise the provider's tpm/burst"),
    "ITPM": ("input tokens", "itpm", "shorten the prompt or raise the provider's itpm/burst"),
    "OTPM": ("output tokens", "otpm", "lower max_tokens or raise the provider's otpm/burst"),
    "team TPM": ("tokens", "the team's tpm_limit", "lower max_tokens or raise the team's tpm_limit"),
}


class QuotaImpossible(QuotaError):
    """The request needs more tokens than one of the provider's token buckets (TPM, ITPM or OTPM) can
    ever hold: waiting would never help. ``bucket`` names it."""

    status = 400
    code = "quota_impossible"

    def __init__(self, provider: str, tokens: int, capacity: float, bucket: str = "TPM"):
        self.provider, self.tokens, self.capacity, self.bucket = provider, tokens, capacity, bucket
        what, rate, advice = _BUCKET_WORDS[bucket]
        super().__init__(
            f"provider {provider}: request needs ~{tokens} {what} but the {bucket} bucket holds at most "
            f"{int(capacity)} ({rate} × burst_seconds / 60); {advice}"
        )


class ProviderPaused(QuotaError):
    """The provider is paused for every worker (its billing is exhausted, a per-day quota is used up):
    nothing is granted until ``until_epoch`` (None: until an operator clears it). The item falls back."""

    status = 503
    code = "provider_paused"

    def __init__(self, provider: str, reason: str, until_epoch: float | None, message: str = ""):
        self.provider, self.reason, self.until_epoch, self.detail = provider, reason, until_epoch, message
        until = "until an operator clears it" if until_epoch is None else f"until {until_epoch:.0f} (epoch)"
        super().__init__(
            f"provider {provider} is paused ({reason}) {until}" + (f": {message}" if message else "")
        )


@dataclass(frozen=True)
class PauseState:
    """A provider pause as the store holds it (shared by every worker): see ProviderPaused."""

    provider: str
    reason: str
    until_epoch: float | None  # None: until cleared
    message: str = ""
    since_epoch: float = 0.0

    def refusal(self) -> ProviderPaused:
        """The error a grant raises while this pause holds."""
        return ProviderPaused(self.provider, self.reason, self.until_epoch, self.message)

    def outlasts(self, until_epoch: float | None) -> bool:
        """Does this pause last at least as long as one until ``until_epoch``? (None: for ever.) A new
        pause never shortens an existing one: a billing pause (no end) is not replaced by a per-day one."""
        if self.until_epoch is None:
            return True
        return until_epoch is not None and self.until_epoch >= until_epoch


class QuotaStoreUnavailable(QuotaError, Unavailable):
    """The shared quota store (Redis) cannot be reached. Never silently replaced by a local limiter."""

    status = 503
    code = "quota_store_unavailable"


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
    # Conformance margin: seconds of refill taken off each bucket's burst capacity, so requests that
    # reach the provider with up to this much jitter still fit a provider bucket configured exactly
    # like ours (the gateway sets it from GATEWAY_QUOTA_JITTER_MARGIN_SECONDS). The refill rate is never
    # reduced.
    margin_seconds: float = 0.0
    # input / output tokens per minute (0: not configured), enforced beside rpm and tpm in the same
    # atomic acquire (Anthropic counts them apart; docs/contract.md §3)
    itpm: int = 0
    otpm: int = 0
    # follow the remaining-quota headers the provider sends (docs/quota.md "Shared keys"): until the
    # reported reset, RPM / TPM refill at most at what the provider says is left
    adaptive: bool = False

    def __post_init__(self) -> None:
        for field_name in ("rpm", "tpm", "max_concurrency"):
            if getattr(self, field_name) < 1:
                raise ValueError(f"ProviderLimits({self.name!r}).{field_name} must be >= 1")
        for field_name in ("itpm", "otpm"):
            if getattr(self, field_name) < 0:
                raise ValueError(
                    f"ProviderLimits({self.name!r}).{field_name} must be >= 0 (0: not configured)"
                )
        for field_name in ("burst_seconds", "timeout_seconds"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"ProviderLimits({self.name!r}).{field_name} must be > 0")
        if self.margin_seconds < 0:
            raise ValueError(f"ProviderLimits({self.name!r}).margin_seconds must be >= 0")

    @property
    def rpm_per_ms(self) -> float:
        return self.rpm / 60_000.0

    @property
    def tpm_per_ms(self) -> float:
        return self.tpm / 60_000.0

    def capacity_for(self, per_minute: float) -> float:
        """rate × burst_seconds, minus rate × margin_seconds (the jitter allowance), at least 1 (also the
        team share bucket's, team_quota.py)."""
        return max(1.0, per_minute / 60.0 * (self.burst_seconds - self.margin_seconds))

    @property
    def rpm_capacity(self) -> float:
        return self.capacity_for(self.rpm)

    @property
    def tpm_capacity(self) -> float:
        return self.capacity_for(self.tpm)

    @property
    def itpm_per_ms(self) -> float:
        return self.itpm / 60_000.0

    @property
    def otpm_per_ms(self) -> float:
        return self.otpm / 60_000.0

    @property
    def itpm_capacity(self) -> float:
        """The ITPM bucket's capacity (0.0 when itpm is not configured: no such bucket)."""
        return self.capacity_for(self.itpm) if self.itpm else 0.0

    @property
    def otpm_capacity(self) -> float:
        """The OTPM bucket's capacity (0.0 when otpm is not configured: no such bucket)."""
        return self.capacity_for(self.otpm) if self.otpm else 0.0

    @property
    def lease_ttl_seconds(self) -> float:
        """A lease outlives the longest legitimate call; a dead holder's slot returns after this."""
        return self.timeout_seconds + self.lease_grace_seconds


@dataclass(frozen=True)
class Reservation:
    provider: str
    tokens: int
    # the input / output share of ``tokens`` charged to the ITPM / OTPM buckets (0 when not configured)
    input_tokens: int = 0
    output_tokens: int = 0
    # the team's budget reservation for the same tokens (None: no team); reconcile settles it
    budget: BudgetReservation | None = field(default=None, compare=False)
    # the team's buckets this grant took from (share, RPM / TPM across providers; None: none), and
    # their live value (a limit changed meanwhile applies to the settle and the give-back)
    team: TeamQuota | None = field(default=None, compare=False)
    current_team: Callable[[], TeamQuota | None] | None = field(default=None, compare=False, repr=False)
    # the live limits (a LimitsSource lookup): reconcile and release use them rather than the limits the
    # caller holds, so a settle after a limit change never refills the bucket at the old rate
    current: Callable[[], ProviderLimits] | None = field(default=None, compare=False, repr=False)
    # the store's counters of requests and tokens granted, just after this grant (adaptive providers;
    # None: not counted): what the gateway sent since this request is the counters now minus these
    sent_mark: tuple[int, int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SettleOutcome:
    """A caller's own step run inside the grant's settle script, atomically after the reconcile (the
    breaker's success: RedisBreaker.success_part): ``function`` is Lua text defining
    ``local function outcome(key, a)`` (its ARGV from index ``a``), ``key`` its key (in the provider's
    hash slot), ``args`` its ARGV; ``url`` the Redis it belongs to (folded only into a store there)."""

    url: str
    function: str
    key: str
    args: tuple[str | bytes | int | float, ...]


class LeaseBusy(Exception):
    """store.admit: the buckets would grant but every concurrency lease of the provider is held, so
    nothing was taken (no token to give back); wait for a lease (store.wait_for_lease) and ask again.
    ``wait_ms``: until the earliest held lease expires."""

    def __init__(self, provider: str, wait_ms: int) -> None:
        super().__init__(f"provider {provider}: every concurrency lease is held")
        self.provider, self.wait_ms = provider, wait_ms


@dataclass(frozen=True)
class Decision:
    """One non-blocking attempt at the buckets (store.try_acquire)."""

    granted: bool
    wait_ms: int  # 0 when granted; else ms until both buckets (and any 429 pause) would allow
    now_ms: float  # the store's clock at the decision (Redis server TIME, or time.monotonic locally)
    impossible: bool = False  # tokens > TPM capacity: waiting will never help
    sent_mark: tuple[int, int] | None = None  # granted, adaptive: the grant counters (Reservation.sent_mark)
    team_wait: bool = (
        False  # not granted only because the team's own buckets are short (the provider's would)
    )
    # an ask with a lease (store.admit): > 0 the buckets would grant but every lease of the provider is
    # held — nothing was taken; ms until the earliest lease expires
    lease_wait_ms: int = 0


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
    # the ITPM / OTPM buckets (all 0 when the provider does not configure itpm / otpm)
    itpm_tokens_available: float = 0.0
    itpm_capacity: float = 0.0
    otpm_tokens_available: float = 0.0
    otpm_capacity: float = 0.0
    configured_itpm: int = 0
    configured_otpm: int = 0
    # the provider pause (billing exhausted, per-day quota), if one holds: nothing is granted meanwhile
    pause: PauseState | None = None
    # shared keys (adaptive): the adjusted RPM / TPM while the provider's headers hold them below the
    # configured rates (None: not adjusted), and the outside use estimated from those headers (per minute)
    adjusted_rpm: float | None = None
    adjusted_tpm: float | None = None
    outside_rpm: float = 0.0
    outside_tpm: float = 0.0

    @classmethod
    def measured(
        cls,
        limits: ProviderLimits,
        available: tuple[float, float, float, float],
        *,
        wait_ms: int,
        paused_until_ms: int,
        leases_in_flight: int,
        observed: tuple[int, int],
        pause: PauseState | None,
        adaptive: AdaptiveView | None = None,
    ) -> ProviderQuotaState:
        """A backend's snapshot: what it measured (the RPM / TPM / ITPM / OTPM tokens ``available``,
        the waits, the leases, the (requests, tokens) ``observed`` in the last 60 s, the pause) beside
        what ``limits`` configure (capacities and rates, filled in here for every backend alike)."""
        rpm, tpm, itpm, otpm = available
        view = adaptive if adaptive is not None and limits.adaptive else AdaptiveView()
        return cls(
            provider=limits.name,
            rpm_tokens_available=rpm,
            rpm_capacity=limits.rpm_capacity,
            tpm_tokens_available=tpm,
            tpm_capacity=limits.tpm_capacity,
            wait_ms=wait_ms,
            paused_until_ms=paused_until_ms,
            leases_in_flight=leases_in_flight,
            max_concurrency=limits.max_concurrency,
            configured_rpm=limits.rpm,
            configured_tpm=limits.tpm,
            observed_rpm=observed[0],
            observed_tpm=observed[1],
            itpm_tokens_available=itpm,
            itpm_capacity=limits.itpm_capacity,
            otpm_tokens_available=otpm,
            otpm_capacity=limits.otpm_capacity,
            configured_itpm=limits.itpm,
            configured_otpm=limits.otpm,
            pause=pause,
            adjusted_rpm=view.rpm,
            adjusted_tpm=view.tpm,
            outside_rpm=view.outside_rpm or 0.0,
            outside_tpm=view.outside_tpm or 0.0,
        )


@dataclass(frozen=True)
class AdaptiveView:
    """What a backend holds of a provider's adjusted state, per minute: the adjusted RPM / TPM (None: the
    configured rate holds) and the outside use (None: no estimate in the last minute)."""

    rpm: float | None = None
    tpm: float | None = None
    outside_rpm: float | None = None
    outside_tpm: float | None = None


class BudgetExceeded(QuotaError, LimitExceeded):
    """A team's token budget for the UTC day or month has no room for this request."""

    status = 429
    code = "budget_exceeded"

    def __init__(self, team: str, period: str, limit: int, used: int, tokens: int):
        self.team, self.period, self.limit, self.used, self.tokens = team, period, limit, used, tokens
        adjective = "daily" if period == "day" else "monthly"
        super().__init__(
            f"team {team}: the {adjective} token budget of {limit} tokens has {max(0, limit - used)} left "
            f"({used} used); this request needs ~{tokens}"
        )

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


@dataclass
class BudgetReservation:
    """Tokens reserved against a team's ledger keys; settled once (reconcile) or given back."""

    team: str
    keys: tuple[str, ...]
    tokens: int
    settled: bool = field(default=False, compare=False)

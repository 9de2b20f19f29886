"""The engine's seams: what ``CrossProviderBatcher`` needs from the outside world, as typed Protocols.

The engine calls nothing else on these objects. The concrete implementations:

* ``QuotaStore``: ``quota.LocalQuotaStore`` (one process) and ``quota.RedisQuotaStore`` (every worker);
* ``Breaker``: ``breaker.LocalBreaker`` and ``breaker_redis.RedisBreaker``;
* ``LimitsProvider``: the gateway's ``providers.limits.LimitsSource`` (live limits from the database);
* ``ItemSource``: ``feed.ItemFeed`` (or any async iterable of items);
* ``ResultSink``: the ``on_result`` callback of ``abatch`` (the gateway's ``EngineThread._on_result``);
* ``AttemptJournal``: ``journal.NullJournal`` (the default) and ``journal.RedisAttemptJournal`` (the
  gateway's workers: every attempt noted in Redis before its request leaves, docs/engine.md);
* ``Clock``: ``time.monotonic`` or a test's fake clock (``tests.clock.FakeClock``).

``tests/engine/test_types_conformance.py`` assigns each concrete class to its Protocol, so mypy
(``make lint``) proves they conform.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from .items import ItemResult, RawItem, WorkItem

if TYPE_CHECKING:  # annotations only
    from .breaker import Permit
    from .quota.adaptive import RemainingQuota
    from .quota.leases import Lease
    from .quota.ledger import BudgetSeed
    from .quota.slots import GlobalSlot
    from .quota.team_quota import TeamLimits, TeamQuota
    from .quota.types import BudgetReservation, Lane, PauseState, ProviderLimits, Reservation, SettleOutcome

__all__ = [
    "AsyncCloseable",
    "AttemptJournal",
    "Breaker",
    "Clock",
    "ItemSource",
    "LimitsProvider",
    "QuotaStore",
    "RawItem",
    "ResultSink",
]


class Clock(Protocol):
    """Monotonic seconds (``time.monotonic``); tests pass a fake clock they step by hand."""

    def __call__(self) -> float: ...


class AsyncCloseable(Protocol):
    async def aclose(self) -> None:
        """Release what is bound to the running event loop (called at the end of each ``asyncio.run``)."""


class QuotaStore(AsyncCloseable, Protocol):
    """Buckets, concurrency leases, the in-flight cap and team budgets (docs/quota.md)."""

    @property
    def global_max_in_flight(self) -> int:
        """This process's in-flight cap (sizes the engine's long-item lane)."""
        ...

    async def acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        *,
        current: Callable[[], ProviderLimits] | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        lane: Lane = "batch",
        step_aside: bool = False,
        team: TeamQuota | None = None,
        current_team: Callable[[], TeamQuota | None] | None = None,
    ) -> Reservation:
        """Wait for 1 request and ``tokens`` tokens of the provider's buckets, and (when the limits set
        itpm / otpm) ``input_tokens`` / ``output_tokens`` of its ITPM / OTPM buckets, all in one atomic
        grant (QuotaImpossible if they can never fit; ProviderPaused while the provider is paused);
        ``current()`` gives the live limits on every retry. Batch asks yield to interactive callers
        waiting for the same provider (docs/engine.md, "Interactive first"). ``step_aside``:
        TeamShareWait instead of a wait that only the team's buckets impose. ``team``: the team's
        share, RPM and TPM buckets taken in the same grant (``current_team()``: their live value)."""
        ...

    async def admit(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        *,
        current: Callable[[], ProviderLimits] | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        lane: Lane = "batch",
        step_aside: bool = False,
        team: TeamQuota | None = None,
        current_team: Callable[[], TeamQuota | None] | None = None,
    ) -> tuple[Reservation, Lease, GlobalSlot | None]:
        """``acquire`` and the provider's concurrency lease in one atomic step: both, or — every lease
        held — neither (LeaseBusy: wait_for_lease, then ask again). The lease heartbeats until
        ``release_lease``. With them this process's in-flight slot (``release_global_slot``; None: the
        cluster cap is busy — give back the rest and wait_for_global_slot)."""
        ...

    def interactive_waiting(self, provider: str) -> AbstractAsyncContextManager[None]:
        """Hold this process's interactive mark on the provider while an interactive caller waits
        (batch asks of every worker yield meanwhile)."""
        ...

    async def release(self, limits: ProviderLimits, reservation: Reservation) -> None:
        """Give an unused grant back (1 request and the reserved tokens)."""

    async def reconcile(
        self,
        limits: ProviderLimits,
        reservation: Reservation,
        actual_tokens: int,
        *,
        actual_input: int | None = None,
        actual_output: int | None = None,
        also: SettleOutcome | None = None,
    ) -> Any:
        """Settle a grant with the provider's reported usage (and the team budget with it); the ITPM /
        OTPM buckets with the input tokens that count there (cache reads do not) and the output tokens.
        ``also``: a caller's step (the breaker's success) run in the same atomic settle where the store
        can (its answer returned), else None — then the caller takes that step itself."""

    async def pause_provider(
        self, provider: str, reason: str, until_epoch: float | None = None, message: str = ""
    ) -> None:
        """Pause the provider for every worker: acquire and try_lease raise ProviderPaused until
        ``until_epoch`` (None: until lift_provider_pause)."""

    async def lift_provider_pause(self, provider: str) -> bool:
        """Lift a provider's pause (the operator's action); True if one was set."""
        ...

    async def provider_pause(self, provider: str) -> PauseState | None:
        """The provider's pause, or None."""
        ...

    async def wait_for_pause(self, provider: str, timeout: float) -> bool:
        """Wait ``timeout`` seconds, or until a pause of the provider is set, changed or lifted in this
        process — by an answer here or by the durable record announced to every process (True)."""
        ...

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        """Pause the provider's bucket for every worker (a 429 with Retry-After)."""
        ...

    async def follow_remaining(
        self, limits: ProviderLimits, reservation: Reservation | None, quota: RemainingQuota
    ) -> bool:
        """An answer's remaining-quota headers for every worker (adaptive providers); True if applied."""
        ...

    async def try_lease(self, limits: ProviderLimits) -> Lease | None:
        """A provider concurrency slot if one is free now, else None. Never waits."""
        ...

    async def release_lease(self, limits: ProviderLimits, lease: Lease) -> None: ...

    async def wait_for_lease(self, limits: ProviderLimits) -> None:
        """Wait until a provider concurrency slot looks free. Takes nothing."""

    async def try_global_slot(self) -> GlobalSlot | None:
        """An in-flight slot of this process if one is free now, else None. Never waits."""
        ...

    async def release_global_slot(self, slot: GlobalSlot) -> None: ...

    async def wait_for_global_slot(self) -> None:
        """Wait until an in-flight slot looks free. Takes nothing."""

    async def reserve_budget(
        self, team: TeamLimits, tokens: int, seed: BudgetSeed | None = None
    ) -> BudgetReservation:
        """Reserve tokens against the team's day and month budgets (BudgetExceeded: no room)."""
        ...

    async def give_back_budget(self, budget: BudgetReservation) -> None:
        """Refund a budget reservation nothing was settled against."""


class Breaker(AsyncCloseable, Protocol):
    """Per-provider circuit breaker (gateway_engine.breaker)."""

    async def allow(self, provider: str, probe_ttl_seconds: float = 30.0, *, prober: str = "") -> Permit:
        """May a call go to ``provider`` now (and is it the half-open probe)? ``prober``: who asks (a
        batch id), kept with a probe it is granted; a refusal names the last one (``last_prober``)."""
        ...

    async def record(self, provider: str, ok: bool, retry_after_seconds: float | None = None) -> str:
        """One call's health signal; returns the state after it."""
        ...

    def success_part(self, provider: str) -> SettleOutcome | None:
        """The step that records one success, for the quota store to fold into the grant's settle
        (``store.reconcile(also=)``); None: nothing to fold (an in-process breaker)."""
        ...

    def learn_folded(self, provider: str, reply: Any) -> str:
        """The answer of a success folded into the settle: the next ``record(provider, ok=True)`` is
        answered from it, not sent again. Returns the state."""
        ...


class LimitsProvider(Protocol):
    """Live provider and team limits (the gateway's LimitsSource, reloaded on every config change)."""

    @property
    def budget_seed(self) -> BudgetSeed | None:
        """Re-seeds a missing budget ledger from the caller's records (None: start at 0)."""
        ...

    async def get(self, name: str) -> ProviderLimits:
        """The provider's current limits; LookupError if it no longer exists."""
        ...

    async def team(self, name: str) -> TeamLimits | None:
        """The team's current limits; None if there is no such team."""
        ...

    def peek(self, name: str, default: ProviderLimits) -> ProviderLimits:
        """The cached limits now (no await): waiters re-ask the bucket with them."""
        ...

    def peek_team(self, name: str) -> TeamLimits | None:
        """The cached team limits now (no await)."""
        ...


class AttemptJournal(Protocol):
    """Where each attempt is noted durably before its request is sent, so an attempt whose answer is
    never stored (the worker died, the claim was lost) is still counted (docs/engine.md)."""

    async def before_send(self, item: WorkItem, provider: str, attempt: int, est_tokens: int) -> None:
        """Note that ``item``'s attempt number ``attempt`` (1-based, this run's) may go to ``provider``
        next, with ``est_tokens`` to reserve (noted before the quota wait; noted again if the item goes
        round without sending). Raises QuotaStoreUnavailable when the journal is unreachable: then
        nothing is sent (the engine rides it out like a quota-store outage)."""

    def sent(self, item: WorkItem, attempt: int) -> None:
        """That attempt's request has been handed to the connection (called from the HTTP layer; must
        not block or raise): an attempt noted but never marked sent did not leave."""


class ItemSource(Protocol):
    """An async feed of work items (``ItemFeed``): served FIFO per provider as they arrive, until it ends."""

    def __aiter__(self) -> AsyncIterator[RawItem]: ...


class ResultSink(Protocol):
    """``abatch``'s ``on_result``: called once per item with its input index and final result. The item's
    in-flight slot is held until the returned awaitable is done (the caller stores the result there)."""

    def __call__(self, index: int, result: ItemResult, /) -> Awaitable[None]: ...

"""The public quota-store API, composed of the four per-concern parts (docs/quota.md, "Module map"):

* ``buckets`` (TokenBuckets: RPM/TPM and team-share buckets, waiting for a grant, 429 pauses),
* ``lease_pool`` (ConcurrencyLeases) and ``slots`` (InFlightSlots: the per-process and cluster caps),
* ``ledger`` (BudgetLedger: team token budgets),
* ``versions`` (ConfigVersion: the shared provider-config version).

LocalQuotaStore (local.py) and RedisQuotaStore (redis_store.py) build the parts of their backend. What
the engine calls on a store is ``gateway_engine.protocols.QuotaStore``; the Django side also calls the
snapshots, the pause, the budget usage and the config version. Each method below only hands over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from .adaptive import RemainingQuota
from .buckets import TokenBuckets
from .config_version import ConfigVersion
from .leases import ConcurrencyLeases, Lease
from .ledger import BudgetLedger, BudgetSeed
from .slots import GlobalSlot, InFlightSlots
from .store_admit import LeaseGrants
from .team_quota import TeamLimits, TeamQuota, TeamQuotaState
from .types import (
    BudgetReservation,
    Decision,
    Lane,
    PauseState,
    ProviderLimits,
    ProviderQuotaState,
    Reservation,
    SettleOutcome,
)


class ComposedQuotaStore(LeaseGrants):
    """Buckets, leases, in-flight slots, the budget ledger and the config version of one backend (the
    grant with its lease, ``admit``: store_admit.py)."""

    backend = "base"

    def __init__(
        self,
        buckets: TokenBuckets,
        lease_pool: ConcurrencyLeases,
        ledger: BudgetLedger,
        versions: ConfigVersion,
        global_max_in_flight: int | None = None,
        cluster_max_in_flight: int | None = None,
    ) -> None:
        self.buckets = buckets
        self.lease_pool = lease_pool
        self.slots = InFlightSlots(lease_pool, global_max_in_flight, cluster_max_in_flight)
        self.ledger = ledger
        self.versions = versions

    async def aclose(self) -> None:
        """Release resources bound to the running event loop (call at the end of an asyncio.run)."""

    # ---- buckets -------------------------------------------------------------------------------------
    async def acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        *,
        max_wait_seconds: float | None = None,
        current: Callable[[], ProviderLimits] | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        lane: Lane = "batch",
        step_aside: bool = False,
        team: TeamQuota | None = None,
        current_team: Callable[[], TeamQuota | None] | None = None,
    ) -> Reservation:
        """Wait until the provider's buckets grant 1 request and `tokens` tokens, and the ITPM / OTPM
        buckets (where set) `input_tokens` / `output_tokens`, in one atomic grant (TokenBuckets.acquire;
        batch asks yield to waiting interactive callers; ``step_aside``: TeamShareWait when only the
        team's share bucket is short)."""
        return await self.buckets.acquire(
            limits,
            tokens,
            max_wait_seconds=max_wait_seconds,
            current=current,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            lane=lane,
            step_aside=step_aside,
            team=team,
            current_team=current_team,
        )

    async def team_snapshot(self, team: TeamQuota) -> TeamQuotaState:
        """The team's RPM / TPM buckets across providers and its use in the last 60 s (usage page)."""
        return await self.buckets.team_snapshot(team)

    async def try_acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        lane: Lane = "batch",
        team: TeamQuota | None = None,
    ) -> Decision:
        """One atomic attempt at the buckets (ITPM / OTPM amounts only where the limits set them; the
        team's buckets with them); never waits. ProviderPaused while the provider is paused."""
        return await self.buckets.try_acquire(
            limits, tokens, input_tokens, output_tokens, lane=lane, team=team
        )

    def interactive_waiting(self, provider: str) -> AbstractAsyncContextManager[None]:
        """Hold this process's interactive mark on the provider while the body waits (priority.py)."""
        return self.buckets.marks.waiting(provider)

    async def interactive_waiters(self, provider: str) -> int:
        """How many processes hold an interactive mark on the provider now."""
        return await self.buckets.interactive_waiters(provider)

    async def release(self, limits: ProviderLimits, reservation: Reservation) -> None:
        """Give an unused grant back (1 request and the reserved tokens)."""
        await self.buckets.release(limits, reservation)

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
        """Settle a grant with the provider's reported usage (TPM: all tokens; ITPM: the input tokens
        that count there, cache reads excluded; OTPM: the output tokens; None: leave as reserved), and
        the team budget reserved with it (all tokens). ``also`` (the breaker's success): run in the same
        atomic script where this store can (``folds``), its answer returned; else None."""
        answer = await self.buckets.reconcile(
            limits,
            reservation,
            actual_tokens,
            actual_input=actual_input,
            actual_output=actual_output,
            also=also if also is not None and self.folds(also) else None,
        )
        if reservation.budget is not None:
            await self.ledger.settle_budget(reservation.budget, actual_tokens)
        return answer

    def folds(self, also: SettleOutcome) -> bool:
        """Whether ``reconcile`` can run ``also`` in its own script (the Redis store, on its server)."""
        return False

    async def follow_remaining(
        self, limits: ProviderLimits, reservation: Reservation | None, quota: RemainingQuota
    ) -> bool:
        """An answer's remaining-quota headers, for every worker (adaptive providers; docs/quota.md
        "Shared keys"); True if applied."""
        return await self.buckets.follow_remaining(limits, reservation, quota)

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        """Pause the provider for every worker (a 429's Retry-After); never shortens a pause."""
        return await self.buckets.penalize(limits, retry_after_seconds)

    async def clear_pause(self, limits: ProviderLimits) -> None:
        """End a 429 pause now (admin action "Clear rate-limit pause")."""
        await self.buckets.clear_pause(limits)

    async def pause_provider(
        self, provider: str, reason: str, until_epoch: float | None = None, message: str = ""
    ) -> None:
        """Pause the provider for every worker: acquire, try_acquire and try_lease raise ProviderPaused
        until ``until_epoch`` (None: until lift_provider_pause). Never shortens a longer pause."""
        await self.buckets.pause_provider(provider, reason, until_epoch, message)

    async def lift_provider_pause(self, provider: str) -> bool:
        """Lift the provider pause (admin action, ``manage.py clear_provider_pause``); True if one held."""
        return await self.buckets.lift_provider_pause(provider)

    async def provider_pause(self, provider: str) -> PauseState | None:
        """The provider's pause, or None."""
        return await self.buckets.provider_pause(provider)

    async def wait_for_pause(self, provider: str, timeout: float) -> bool:
        """Wait ``timeout`` s, or until a pause of the provider is set, changed or lifted (True)."""
        return await self.buckets.wait_for_pause(provider, timeout)

    def hold_pauses(self, pauses: Mapping[str, PauseState]) -> None:
        """The durable pauses of every provider (the local view every grant checks first)."""
        self.buckets.hold_pauses(pauses)

    async def refill_pauses(self) -> int:
        """Write the local view's pauses back into the store (after a Redis restart)."""
        return await self.buckets.refill_pauses()

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        return await self.buckets.snapshot(limits)

    async def snapshot_many(self, limits_list: list[ProviderLimits]) -> list[ProviderQuotaState]:
        return await self.buckets.snapshot_many(limits_list)

    # ---- concurrency leases and in-flight slots ------------------------------------------------------
    async def try_lease(self, limits: ProviderLimits) -> Lease | None:
        """A provider concurrency slot if one is free now, else None. Never waits."""
        return await self.lease_pool.try_lease(limits)

    async def release_lease(self, limits: ProviderLimits, lease: Lease) -> None:
        await self.lease_pool.release_lease(limits, lease)

    async def wait_for_lease(self, limits: ProviderLimits) -> None:
        """Wait until a provider concurrency slot looks free. Takes nothing."""
        await self.lease_pool.wait_for_lease(limits)

    def lease(self, limits: ProviderLimits) -> AbstractAsyncContextManager[Lease]:
        """Hold a provider concurrency slot (waiting for one); take it AFTER the bucket grant."""
        return self.lease_pool.lease(limits)

    def global_slot(self) -> AbstractAsyncContextManager[None]:
        """Hold an in-flight slot of this process (and of the cluster, if capped), waiting for one."""
        return self.slots.global_slot()

    async def try_global_slot(self) -> GlobalSlot | None:
        """An in-flight slot if one is free now, else None. Never waits."""
        return await self.slots.try_global_slot()

    async def release_global_slot(self, slot: GlobalSlot) -> None:
        await self.slots.release_global_slot(slot)

    async def wait_for_global_slot(self) -> None:
        """Wait until an in-flight slot looks free. Takes nothing."""
        await self.slots.wait_for_global_slot()

    @property
    def global_max_in_flight(self) -> int:
        return self.slots.global_max_in_flight

    @property
    def cluster_max_in_flight(self) -> int:
        return self.slots.cluster_max_in_flight

    @property
    def global_in_flight(self) -> int:
        return self.slots.in_flight

    # ---- team token budgets --------------------------------------------------------------------------
    async def reserve_budget(
        self, team: TeamLimits, tokens: int, seed: BudgetSeed | None = None, *, now_s: float | None = None
    ) -> BudgetReservation:
        """Reserve tokens against the team's day and month budgets (BudgetExceeded: no room)."""
        return await self.ledger.reserve_budget(team, tokens, seed, now_s=now_s)

    async def budget_usage(
        self, team: TeamLimits, seed: BudgetSeed | None = None, *, now_s: float | None = None
    ) -> list[tuple[str, int | None, int]]:
        """[(period, limit or None, used)] for the UTC day and month."""
        return await self.ledger.budget_usage(team, seed, now_s=now_s)

    async def forget_budget(self, team: TeamLimits, *, now_s: float | None = None) -> None:
        """Drop the team's ledger for today and this month (its budgets were removed)."""
        await self.ledger.forget_budget(team, now_s=now_s)

    async def settle_budget(self, budget: BudgetReservation, actual_tokens: int) -> None:
        """Replace the reserved estimate by the reported usage. Once."""
        await self.ledger.settle_budget(budget, actual_tokens)

    async def charge_budget(self, team: TeamLimits, tokens: int, *, now_s: float | None = None) -> None:
        """Count tokens used without a reservation (a result served outside the engine)."""
        await self.ledger.charge_budget(team, tokens, now_s=now_s)

    async def give_back_budget(self, budget: BudgetReservation) -> None:
        """Refund a budget reservation nothing was settled against."""
        await self.ledger.give_back_budget(budget)

    # ---- config version ------------------------------------------------------------------------------
    async def config_version(self) -> int:
        """The shared provider-config version (a limits source reloads when it moved)."""
        return await self.versions.config_version()

"""Admission: what an attempt must hold before its request may leave, taken in one fixed order.

``Admission.admit(request)`` is the one way in (the seam later lanes and dimensions extend):

    1. team budget:    store.reserve_budget(team, estimated tokens)  — BudgetExceeded: not sent, not retried
    2. bucket token    store.admit(limits, estimated tokens, input_tokens=, output_tokens=)  — ONE atomic
       + provider      grant of the bucket token (RPM, TPM, ITPM / OTPM where set; the team's share
         lease:        bucket and RPM / TPM: quota/team_quota.py) and the provider's cross-worker
                       concurrency lease (lua.py ADMIT): both are taken, or — every lease held — neither
                       (LeaseBusy). Waits only on THIS provider's buckets, holding nothing else.
    3. in-flight slot: this process's cap, a local check taken just around each try of 2 (held only
                       while the store is asked, kept with the grant, given back when the try is
                       refused: quota/slots.py LocalSlotHold) — and the cluster cap's lease after it
    4. (long items)    the long-item lane (at most 3/4 of the in-flight slots)   — taken without waiting

The rule, stated and enforced here and nowhere else: **bucket token first, then the concurrency
slots, never the reverse; no idle token holders.** Taking token and lease in one atomic step satisfies
it: no attempt ever holds a lease while it waits for a token, nor a token while it waits for a lease —
a busy lease takes nothing, so there is nothing to give back (no RELEASE round trip), and the item waits
for a lease holding nothing; a full process waits for its slot before asking, holding nothing either.
If the cluster cap or 4 is busy, everything taken so far goes back, the lease and the bucket token
included (store.release: 1 request + the reserved tokens), the item waits until that one
looks free (woken at once by a release in this process, short polling across processes) and starts
again at 2. A send therefore follows its grant at once, and the provider never sees more than capacity
+ rate × window. ``settle`` reconciles the grant to the provider's reported usage after the send;
``release`` gives back a grant that will not be used.

The interactive lane waits for its turn first: one provider's callers of one event loop take turns in
fair order over teams (quota/fair_gate.py: SFQ by weight, the share cap, ``max_waiting_calls``), and
the caller whose turn it is does 2-4 alone, keeping the turn while it waits for a busy lease or slot.

A paused provider (billing exhausted, per-day quota: ``store.pause_provider``) makes 2 raise
``ProviderPaused`` (checked in the same atomic step); it propagates out of ``admit`` unchanged with
nothing held (the budget refunded), and the engine falls back to the next provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from .admission_slots import AttemptSlots, Blocked, Granted, Stack
from .live_limits import LiveLimits, TeamAsk, TeamTurns
from .options import EngineOptions
from .protocols import QuotaStore
from .quota.fair_gate import FairGate, FairGates, Seat, TeamPlace, TeamShareWait
from .quota.lease_window import LeaseWindow
from .quota.types import BudgetReservation, Lane, LeaseBusy, ProviderLimits, Reservation, SettleOutcome

__all__ = ["Admission", "AdmissionRequest", "Admitted", "Dimension", "Lane", "Stack"]

_Live: TypeAlias = "tuple[Callable[[], ProviderLimits], TeamAsk]"  # the live provider limits, the team
DIMENSIONS = ("rpm", "tpm", "itpm", "otpm")


@dataclass(frozen=True)
class Dimension:
    """One quantity an attempt takes from the provider's buckets: ("rpm", 1), ("tpm", estimate), and
    where the caller splits its estimate ("itpm", input part) and ("otpm", output part) — taken from
    the ITPM / OTPM buckets when the provider sets itpm / otpm."""

    name: str
    amount: int

    def __post_init__(self) -> None:
        if self.name not in DIMENSIONS:
            raise ValueError(f"unknown quota dimension {self.name!r} (known: {', '.join(DIMENSIONS)})")


@dataclass(frozen=True)
class AdmissionRequest:
    """What one attempt asks for: the provider's limits, the dimensions, the item's team and lane, and
    whether a cancel of the batch stops the wait (only before the item's first send)."""

    limits: ProviderLimits
    dimensions: tuple[Dimension, ...]
    team: str = ""
    lane: Lane = "batch"
    check_cancel: bool = False

    @classmethod
    def for_item(
        cls,
        limits: ProviderLimits,
        est_tokens: int,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        team: str,
        check_cancel: bool,
        lane: Lane = "batch",
    ) -> AdmissionRequest:
        """One request and the estimated tokens (with their input / output split, where known: the
        prompt estimate and max_tokens), in ``lane``."""
        dimensions = [Dimension("rpm", 1), Dimension("tpm", est_tokens)]
        if input_tokens is not None:
            dimensions.append(Dimension("itpm", input_tokens))
        if output_tokens is not None:
            dimensions.append(Dimension("otpm", output_tokens))
        return cls(limits, tuple(dimensions), team=team, lane=lane, check_cancel=check_cancel)

    @property
    def tokens(self) -> int:
        """The tokens to reserve (the tpm dimension)."""
        return sum(d.amount for d in self.dimensions if d.name == "tpm")

    def _amount(self, name: str) -> int | None:
        amounts = [d.amount for d in self.dimensions if d.name == name]
        return sum(amounts) if amounts else None

    @property
    def input_tokens(self) -> int | None:
        """The input part of the estimate (the itpm dimension); None: not split (see TokenAsk)."""
        return self._amount("itpm")

    @property
    def output_tokens(self) -> int | None:
        """The output part of the estimate (the otpm dimension); None: not split."""
        return self._amount("otpm")


@dataclass(frozen=True)
class Admitted:
    """An admitted attempt: the bucket grant (with the team's budget reservation and the live limits),
    ``held`` (gate, long lane, provider lease: closed after the send) and ``slot`` (the in-flight slot,
    and the budget refund if nothing was settled: closed once the result is stored)."""

    request: AdmissionRequest
    reservation: Reservation
    held: Stack
    slot: Stack


class Admission:
    """One run's admission: the team budget, this run's per-provider gates, the buckets and provider
    leases (one grant), the long lane and the in-flight slots, in that order (module docstring)."""

    def __init__(
        self,
        store: QuotaStore,
        limits: LiveLimits,
        options: EngineOptions,
        should_cancel: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.limits = limits
        self.should_cancel = should_cancel  # the run's cancel check (``check_cancel`` requests stop on it)
        self.long_item_tokens = options.long_item_tokens
        slots = max(1, int(store.global_max_in_flight))
        self.long_lane = asyncio.Semaphore(max(1, int(slots * options.long_lane_share)))
        self.slots = AttemptSlots(store, self.long_lane)  # steps 3-4 (admission_slots.py)
        self._gates: dict[tuple[str, int], LeaseWindow] = {}
        self.fair = FairGates()  # the interactive lane's queues, fair over teams (quota/fair_gate.py)
        self.team_turns = TeamTurns()  # batch items whose team's own buckets are short (live_limits.py)

    async def admit(self, request: AdmissionRequest) -> Admitted | None:
        """Team budget, then bucket token and provider lease (one atomic grant), then — without waiting
        — long lane and in-flight slot. None when the batch was cancelled (and ``check_cancel`` is set) before anything
        was sent; then nothing is held.

        The estimated tokens are first reserved against the team's day and month budgets
        (BudgetExceeded if there is no room: the item is not retried); the reservation rides on the
        returned Reservation, ``settle`` settles it to the provider's usage, and closing ``slot`` refunds
        it if nothing was settled (not sent, or no usage reported). The team's buckets (share cap,
        RPM / TPM across providers: quota/team_quota.py) grant together with the provider's."""
        store, limits, est = self.store, request.limits, request.tokens
        team_limits = await self.limits.team(request.team)
        budget: BudgetReservation | None = None
        if team_limits is not None and team_limits.has_budget:
            budget = await store.reserve_budget(team_limits, est, self.limits.budget_seed)
        team = self.limits.team_ask(request.team, team_limits)
        try:
            if request.lane == "interactive":
                admitted = await self._admit_interactive(request, limits, team)
            else:
                admitted = await self._admit_provider(request, limits, team)
        except BaseException:
            if budget is not None:
                await store.give_back_budget(budget)
            raise
        if admitted is None or budget is None:
            if admitted is None and budget is not None:
                await store.give_back_budget(budget)
            return admitted
        admitted.slot.push_async_callback(store.give_back_budget, budget)  # no-op once settled
        return replace(admitted, reservation=replace(admitted.reservation, budget=budget))

    async def settle(
        self, admitted: Admitted, usage: Mapping[str, int], also: SettleOutcome | None = None
    ) -> Any:
        """Reconcile the grant (and the team budget with it) to the provider's reported usage: TPM with
        total_tokens, ITPM with prompt_tokens − cached_tokens (cache reads do not count toward a
        provider's input limit; cache writes do, and prompt_tokens includes them) and OTPM with
        completion_tokens. A part the usage does not report stays as reserved. ``also`` (the breaker's
        success): run in the same atomic settle where the store can — its answer, else None."""
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        actual_input = None if prompt is None else max(0, int(prompt) - int(usage.get("cached_tokens") or 0))
        return await self.store.reconcile(
            admitted.request.limits,
            admitted.reservation,
            usage["total_tokens"],
            actual_input=actual_input,
            actual_output=None if completion is None else int(completion),
            also=also,
        )

    async def release(self, admitted: Admitted) -> None:
        """Give back everything an admitted attempt holds, without sending (granted just as it stopped)."""
        await admitted.held.aclose()
        await admitted.slot.aclose()
        await self.store.release(admitted.request.limits, admitted.reservation)

    async def _admit_interactive(
        self, request: AdmissionRequest, limits: ProviderLimits, team: TeamAsk
    ) -> Admitted | None:
        """The interactive lane: wait for the provider's asking turn in fair order over teams
        (quota/fair_gate.py), then, as the only asker of this loop, bucket token and lease (one atomic
        grant), lane and in-flight slot (waiting for a busy one while keeping the turn, holding nothing)."""
        store, live, long_item = (
            self.store,
            self.limits.current(limits),
            request.tokens > self.long_item_tokens,
        )
        gate = self.fair.gate(limits.name)
        seat = await self._seat(gate, TeamPlace.of(request.team, team.limits), limits)
        try:
            while True:
                granted = await self._interactive_grant(gate, seat, (live, team), request, long_item)
                if granted is None:
                    continue  # waited for a busy lane or lease, holding nothing
                reservation, limits = granted[0], live()
                if request.check_cancel and self.should_cancel():
                    await self.slots.give_back(self.slots.holding(None, limits, granted), limits, reservation)
                    gate.close(seat)
                    return None
                blocked, held, slot = await self.slots.take(None, limits, granted, long_item)
                if not blocked:
                    gate.sent(seat)
                    held.callback(gate.close, seat)
                    return Admitted(request, team.live(reservation, live), held, slot)
                await self.slots.give_back(held, limits, reservation)  # no idle token holders; turn kept
                async with store.interactive_waiting(limits.name):
                    await self.slots.wait_until_free(blocked, limits)
        except BaseException:
            gate.close(seat)
            raise

    async def _interactive_grant(
        self, gate: FairGate, seat: Seat, live: _Live, request: AdmissionRequest, long_item: bool
    ) -> Granted | None:
        """The seat's grant and lease; None after waiting (holding nothing, the turn kept, batch asks of
        every worker yielding) for a busy long lane or for a lease when every one was held."""
        blocked: Blocked = "lane" if long_item and self.long_lane.locked() else ""
        if not blocked:
            try:
                return await self._interactive_token(gate, seat, live, request)
            except LeaseBusy:
                blocked = "lease"  # nothing was taken
        async with self.store.interactive_waiting(request.limits.name):
            await self.slots.wait_until_free(blocked, live[0]())
        return None

    async def _seat(self, gate: FairGate, place: TeamPlace, limits: ProviderLimits) -> Seat:
        """The asking turn: at once if the provider's queue is empty, else after the teams before it."""
        seat = gate.try_enter(place, limits.max_concurrency)
        if seat is not None:
            return seat
        async with self.store.interactive_waiting(limits.name):  # waiting here is waiting for quota
            return await gate.wait(place, limits.max_concurrency)

    async def _interactive_token(
        self, gate: FairGate, seat: Seat, live: _Live, request: AdmissionRequest
    ) -> Granted:
        """The bucket grant and lease for the seat's call; while only its team's buckets are short,
        the turn goes to the other teams meanwhile."""
        while True:
            try:
                return await self._grant(live, request)
            except TeamShareWait as capped:
                async with self.store.interactive_waiting(capped.provider):
                    await gate.step_aside(seat, capped.seconds)

    def _gate(self, limits: ProviderLimits) -> LeaseWindow:
        """At most max_concurrency items of this run between "asking the bucket" and "answer in" per
        provider, fewer while other processes hold the provider's leases (quota/lease_window.py): the
        others wait here, locally, instead of asking the store for a grant and a lease and being told
        every lease is held (a round trip for nothing). No token is held while waiting here."""
        key = (limits.name, max(1, int(limits.max_concurrency)))
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = LeaseWindow(key[1])
        return gate

    async def _admit_provider(
        self, request: AdmissionRequest, limits: ProviderLimits, team: TeamAsk
    ) -> Admitted | None:
        """Bucket token and lease (one atomic grant; nothing taken while every lease is held), lane,
        in-flight slot; everything back and start over when one is busy."""
        store, long_item = self.store, request.tokens > self.long_item_tokens
        live = self.limits.current(limits)
        gate = self._gate(limits)
        while True:
            if long_item and self.long_lane.locked():
                await self.slots.wait_until_free("lane", limits)  # holding nothing
            try:
                granted = await self._bucket_token(gate, (live, team), request)
            except LeaseBusy:  # nothing taken (the gate given back): wait for a lease, ask again
                gate.lease_refused()
                await store.wait_for_lease(limits)
                if request.check_cancel and self.should_cancel():
                    return None
                continue
            reservation, limits = granted[0], live()
            if request.check_cancel and self.should_cancel():
                await self.slots.give_back(self.slots.holding(gate, limits, granted), limits, reservation)
                return None
            blocked, held, slot = await self.slots.take(gate, limits, granted, long_item)
            if not blocked:
                gate.lease_taken()
                return Admitted(request, team.live(reservation, live), held, slot)
            await self.slots.give_back(held, limits, reservation)  # no idle token holders
            await self.slots.wait_until_free(blocked, limits)
            if request.check_cancel and self.should_cancel():
                return None

    async def _bucket_token(self, gate: LeaseWindow, live: _Live, request: AdmissionRequest) -> Granted:
        """Pass this run's gate for the provider, then wait for the buckets' grant and the lease (gate
        held after). While only the team's own buckets are short, wait holding no gate slot (the team's
        turn). LeaseBusy (the gate given back): every lease is held, nothing was taken."""
        while True:
            await gate.acquire()
            try:
                return await self._grant(live, request)
            except TeamShareWait as capped:
                gate.release()
                await self.team_turns.wait(capped)
            except BaseException:
                gate.release()
                raise

    async def _grant(self, live: _Live, request: AdmissionRequest) -> Granted:
        """The provider's and the team's buckets' grant for ``request``, asked with their live limits,
        and the provider's lease with it (store.admit: both or neither)."""
        current, team = live
        return await self.store.admit(
            current(),
            request.tokens,
            current=current,
            input_tokens=request.input_tokens,
            output_tokens=request.output_tokens,
            lane=request.lane,
            step_aside=True,
            team=team.current(),
            current_team=team.current,
        )

"""Admission: what an attempt must hold before its request may leave, taken in one fixed order.

``Admission.admit(request)`` is the one way in (the seam later lanes and dimensions extend):

    1. team budget:    store.reserve_budget(team, estimated tokens)  — BudgetExceeded: not sent, not retried
    2. bucket token:   store.acquire(limits, estimated tokens, input_tokens=, output_tokens=)  — waits
                       only on THIS provider's buckets (RPM, TPM, and ITPM / OTPM where it sets them;
                       the team's: its per-provider share bucket, its RPM / TPM across all providers;
                       quota/team_quota.py), all in one atomic grant, holding nothing else
    3. (long items)    the long-item lane (at most 3/4 of the in-flight slots)   — taken without waiting
    4. provider lease: store.try_lease(limits)                   — cross-worker concurrency slot, no wait
    5. in-flight slot: store.try_global_slot()                   — per-process cap, no wait

The rule, stated and enforced here and nowhere else: **bucket token first, then the concurrency
slots, never the reverse; no idle token holders.** If 3, 4 or 5 is busy, everything taken so far goes
back, the bucket token included (store.release: 1 request + the reserved tokens), the item waits until
that one looks free (woken at once by a release in this process, short polling across processes) and
starts again at 2. A send therefore follows its grant at once, and the provider never sees more than
capacity + rate × window. ``settle`` reconciles the grant to the provider's reported usage after the
send; ``release`` gives back a grant that will not be used.

The interactive lane waits for its turn first: one provider's callers of one event loop take turns in
fair order over teams (quota/fair_gate.py: SFQ by weight, the share cap, ``max_waiting_calls``), and
the caller whose turn it is does 2-5 alone, keeping the turn while it waits for a busy lease or slot.

A paused provider (billing exhausted, per-day quota: ``store.pause_provider``) makes 2 or 4 raise
``ProviderPaused``; it propagates out of ``admit`` unchanged with nothing held (the grant given back,
the budget refunded), and the engine falls back to the next provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from .live_limits import LiveLimits, TeamAsk, TeamTurns
from .options import EngineOptions
from .protocols import QuotaStore
from .quota.fair_gate import FairGate, FairGates, Seat, TeamPlace, TeamShareWait
from .quota.lease_window import LeaseWindow
from .quota.types import BudgetReservation, Lane, ProviderLimits, Reservation

__all__ = ["Admission", "AdmissionRequest", "Admitted", "Dimension", "Lane", "Stack"]

Stack: TypeAlias = "AsyncExitStack[bool | None]"
_Live: TypeAlias = "tuple[Callable[[], ProviderLimits], TeamAsk]"  # the live provider limits, the team
_Blocked: TypeAlias = Literal["", "lane", "lease", "slot"]  # what was busy when taking slots ("": nothing)
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
    """One run's admission: the team budget, the buckets, this run's per-provider gates, the long lane,
    the provider leases and the in-flight slots, in that order (module docstring)."""

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
        self._gates: dict[tuple[str, int], LeaseWindow] = {}
        self.fair = FairGates()  # the interactive lane's queues, fair over teams (quota/fair_gate.py)
        self.team_turns = TeamTurns()  # batch items whose team's own buckets are short (live_limits.py)

    async def admit(self, request: AdmissionRequest) -> Admitted | None:
        """Team budget, then bucket token, then — without waiting — long lane, provider lease and
        in-flight slot. None when the batch was cancelled (and ``check_cancel`` is set) before anything
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

    async def settle(self, admitted: Admitted, usage: Mapping[str, int]) -> None:
        """Reconcile the grant (and the team budget with it) to the provider's reported usage: TPM with
        total_tokens, ITPM with prompt_tokens − cached_tokens (cache reads do not count toward a
        provider's input limit; cache writes do, and prompt_tokens includes them) and OTPM with
        completion_tokens. A part the usage does not report stays as reserved."""
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        actual_input = None if prompt is None else max(0, int(prompt) - int(usage.get("cached_tokens") or 0))
        await self.store.reconcile(
            admitted.request.limits,
            admitted.reservation,
            usage["total_tokens"],
            actual_input=actual_input,
            actual_output=None if completion is None else int(completion),
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
        (quota/fair_gate.py), then, as the only asker of this loop, bucket token, lane, lease and
        in-flight slot (waiting for a busy one while keeping the turn, holding nothing else)."""
        store, live = self.store, self.limits.current(limits)
        gate = self.fair.gate(limits.name)
        seat = await self._seat(gate, TeamPlace.of(request.team, team.limits), limits)
        try:
            while True:
                reservation = await self._interactive_token(gate, seat, (live, team), request)
                limits = live()
                if request.check_cancel and self.should_cancel():
                    await store.release(limits, reservation)
                    gate.close(seat)
                    return None
                try:
                    blocked, held, slot = await self._take_slots(
                        None, limits, request.tokens > self.long_item_tokens
                    )
                except BaseException:
                    await store.release(limits, reservation)
                    raise
                if not blocked:
                    gate.sent(seat)
                    held.callback(gate.close, seat)
                    return Admitted(request, team.live(reservation, live), held, slot)
                await held.aclose()
                await store.release(limits, reservation)  # no idle token holders; the turn is kept
                async with store.interactive_waiting(limits.name):  # batch asks of every worker yield
                    await self._wait_until_free(blocked, limits)
        except BaseException:
            gate.close(seat)
            raise

    async def _seat(self, gate: FairGate, place: TeamPlace, limits: ProviderLimits) -> Seat:
        """The asking turn: at once if the provider's queue is empty, else after the teams before it."""
        seat = gate.try_enter(place, limits.max_concurrency)
        if seat is not None:
            return seat
        async with self.store.interactive_waiting(limits.name):  # waiting here is waiting for quota
            return await gate.wait(place, limits.max_concurrency)

    async def _interactive_token(
        self, gate: FairGate, seat: Seat, live: _Live, request: AdmissionRequest
    ) -> Reservation:
        """The bucket grant for the seat's call; while only its team's buckets are short, the turn
        goes to the other teams meanwhile."""
        while True:
            try:
                return await self._grant(live, request, step_aside=True)
            except TeamShareWait as capped:
                async with self.store.interactive_waiting(capped.provider):
                    await gate.step_aside(seat, capped.seconds)

    def _gate(self, limits: ProviderLimits) -> LeaseWindow:
        """At most max_concurrency items of this run between "asking the bucket" and "answer in" per
        provider, fewer while other processes hold the provider's leases (quota/lease_window.py): the
        others wait here, locally, instead of taking a bucket token, failing to get a lease and giving
        the token back (three store round trips for nothing). No token is held while waiting here."""
        key = (limits.name, max(1, int(limits.max_concurrency)))
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = LeaseWindow(key[1])
        return gate

    async def _admit_provider(
        self, request: AdmissionRequest, limits: ProviderLimits, team: TeamAsk
    ) -> Admitted | None:
        """Bucket token, lane, lease, in-flight slot; everything back and start over when one is busy."""
        store, est = self.store, request.tokens
        long_item = est > self.long_item_tokens
        live = self.limits.current(limits)
        gate = self._gate(limits)
        while True:
            reservation = await self._bucket_token(gate, (live, team), request)
            limits = live()
            if request.check_cancel and self.should_cancel():
                gate.release()
                await store.release(limits, reservation)
                return None
            try:
                blocked, held, slot = await self._take_slots(gate, limits, long_item)
            except BaseException:  # ProviderPaused (paused since the grant), the store down, a cancel
                await store.release(limits, reservation)
                raise
            if not blocked:
                gate.lease_taken()
                return Admitted(request, team.live(reservation, live), held, slot)
            if blocked == "lease":
                gate.lease_refused()
            await held.aclose()
            await store.release(limits, reservation)  # no idle token holders
            await self._wait_until_free(blocked, limits)
            if request.check_cancel and self.should_cancel():
                return None

    async def _bucket_token(self, gate: LeaseWindow, live: _Live, request: AdmissionRequest) -> Reservation:
        """Pass this run's gate for the provider, then wait for the buckets' grant (gate held after).
        While only the team's own buckets are short, wait holding no gate slot (the team's turn)."""
        while True:
            await gate.acquire()
            try:
                return await self._grant(live, request, step_aside=True)
            except TeamShareWait as capped:
                gate.release()
                await self.team_turns.wait(capped)
            except BaseException:
                gate.release()
                raise

    async def _grant(self, live: _Live, request: AdmissionRequest, step_aside: bool = False) -> Reservation:
        """The provider's and the team's buckets' grant for ``request``, asked with their live limits."""
        current, team = live
        return await self.store.acquire(
            current(),
            request.tokens,
            current=current,
            input_tokens=request.input_tokens,
            output_tokens=request.output_tokens,
            lane=request.lane,
            step_aside=step_aside,
            team=team.current(),
            current_team=team.current,
        )

    async def _take_slots(
        self, gate: LeaseWindow | None, limits: ProviderLimits, long_item: bool
    ) -> tuple[_Blocked, Stack, Stack]:
        """Without waiting: the long lane (long items only), the provider lease, the in-flight slot.
        Returns what was busy ("" when everything was taken), ``held`` (gate, lane, lease) and ``slot``
        (in-flight). On an exception everything taken is given back. (``gate`` None: the interactive
        lane, whose seat the caller holds itself.)"""
        held, slot = AsyncExitStack(), AsyncExitStack()
        if gate is not None:
            held.callback(gate.release)
        try:
            blocked = await self._try_slots(held, slot, limits, long_item)
        except BaseException:
            await slot.aclose()
            await held.aclose()
            raise
        return blocked, held, slot

    async def _try_slots(self, held: Stack, slot: Stack, limits: ProviderLimits, long_item: bool) -> _Blocked:
        store = self.store
        if long_item:
            if self.long_lane.locked():
                return "lane"
            await self.long_lane.acquire()  # free: returns without yielding
            held.callback(self.long_lane.release)
        lease = await store.try_lease(limits)
        if lease is None:
            return "lease"
        held.push_async_callback(store.release_lease, limits, lease)
        global_slot = await store.try_global_slot()
        if global_slot is None:
            return "slot"
        slot.push_async_callback(store.release_global_slot, global_slot)
        return ""

    async def _wait_until_free(self, blocked: _Blocked, limits: ProviderLimits) -> None:
        """Wait (holding nothing) until what was busy looks free."""
        if blocked == "lane":
            await self.long_lane.acquire()  # FIFO; hand it straight on, we start over at the bucket
            self.long_lane.release()
        elif blocked == "lease":
            await self.store.wait_for_lease(limits)
        else:
            await self.store.wait_for_global_slot()

"""What an admitted attempt holds after its bucket grant and provider lease (admission.py, steps 3-4):
the long-item lane and the in-flight slot, each taken without waiting; what goes back when one is busy
(everything, the lease and the grant included: no idle token holders), and the wait for it, holding
nothing."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Literal, TypeAlias

from .protocols import QuotaStore
from .quota.lease_window import LeaseWindow
from .quota.leases import Lease
from .quota.types import ProviderLimits, Reservation

Stack: TypeAlias = "AsyncExitStack[bool | None]"
Blocked: TypeAlias = Literal["", "lane", "lease", "slot"]  # what was busy when taking slots ("": nothing)


class AttemptSlots:
    """The long lane (a semaphore of this run) and the store's in-flight slots, after the grant."""

    def __init__(self, store: QuotaStore, long_lane: asyncio.Semaphore) -> None:
        self.store = store
        self.long_lane = long_lane

    def holding(self, gate: LeaseWindow | None, limits: ProviderLimits, lease: Lease) -> Stack:
        """What an admitted attempt holds until its send is done: the gate (batch lane) and the lease."""
        held = AsyncExitStack()
        if gate is not None:
            held.callback(gate.release)
        held.push_async_callback(self.store.release_lease, limits, lease)
        return held

    async def give_back(self, held: Stack, limits: ProviderLimits, reservation: Reservation) -> None:
        """Everything an attempt took goes back: the lease (and gate, lane), then the bucket grant."""
        try:
            await held.aclose()
        finally:
            await self.store.release(limits, reservation)

    async def take(
        self,
        gate: LeaseWindow | None,
        limits: ProviderLimits,
        lease: Lease,
        reservation: Reservation,
        long_item: bool,
    ) -> tuple[Blocked, Stack, Stack]:
        """After the grant and lease, without waiting: the long lane (long items only) and the in-flight
        slot. Returns what was busy ("" when everything was taken), ``held`` (gate, lease, lane) and
        ``slot`` (in-flight). On an exception everything is given back, the grant included. (``gate``
        None: the interactive lane, whose seat the caller holds itself.)"""
        held, slot = self.holding(gate, limits, lease), AsyncExitStack()
        try:
            blocked = await self._try(held, slot, long_item)
        except BaseException:
            await slot.aclose()
            await self.give_back(held, limits, reservation)
            raise
        return blocked, held, slot

    async def _try(self, held: Stack, slot: Stack, long_item: bool) -> Blocked:
        if long_item:
            if self.long_lane.locked():
                return "lane"
            await self.long_lane.acquire()  # free: returns without yielding
            held.callback(self.long_lane.release)
        global_slot = await self.store.try_global_slot()
        if global_slot is None:
            return "slot"
        slot.push_async_callback(self.store.release_global_slot, global_slot)
        return ""

    async def wait_until_free(self, blocked: Blocked, limits: ProviderLimits) -> None:
        """Wait (holding nothing) until what was busy looks free."""
        if blocked == "lane":
            await self.long_lane.acquire()  # FIFO; hand it straight on, we start over at the bucket
            self.long_lane.release()
        elif blocked == "lease":
            await self.store.wait_for_lease(limits)
        else:
            await self.store.wait_for_global_slot()

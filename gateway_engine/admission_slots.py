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
from .quota.slots import GlobalSlot
from .quota.types import ProviderLimits, Reservation

Stack: TypeAlias = "AsyncExitStack[bool | None]"
Blocked: TypeAlias = Literal["", "lane", "lease", "slot"]  # what was busy when taking slots ("": nothing)
# store.admit's answer: the grant, the provider lease, this process's in-flight slot (None: cluster cap busy)
Granted: TypeAlias = "tuple[Reservation, Lease, GlobalSlot | None]"


class AttemptSlots:
    """The long lane (a semaphore of this run) and the store's in-flight slots, after the grant."""

    def __init__(self, store: QuotaStore, long_lane: asyncio.Semaphore) -> None:
        self.store = store
        self.long_lane = long_lane

    def holding(self, gate: LeaseWindow | None, limits: ProviderLimits, granted: Granted) -> Stack:
        """What an admitted attempt holds until its send is done: the gate (batch lane) and the lease
        (and, until ``take`` moves it to its own stack, the in-flight slot)."""
        _, lease, global_slot = granted
        held = AsyncExitStack()
        if gate is not None:
            held.callback(gate.release)
        held.push_async_callback(self.store.release_lease, limits, lease)
        if global_slot is not None:
            held.push_async_callback(self.store.release_global_slot, global_slot)
        return held

    async def give_back(self, held: Stack, limits: ProviderLimits, reservation: Reservation) -> None:
        """Everything an attempt took goes back: the slot, lease (and gate, lane), then the bucket grant."""
        try:
            await held.aclose()
        finally:
            await self.store.release(limits, reservation)

    async def take(
        self, gate: LeaseWindow | None, limits: ProviderLimits, granted: Granted, long_item: bool
    ) -> tuple[Blocked, Stack, Stack]:
        """After the grant, lease and in-flight slot (store.admit), without waiting: the long lane (long
        items only). Returns what was busy ("" when everything was taken; "slot": the cluster cap),
        ``held`` (gate, lease, lane) and ``slot`` (in-flight). (``gate`` None: the interactive lane,
        whose seat the caller holds itself.)"""
        held, slot = self.holding(gate, limits, (*granted[:2], None)), AsyncExitStack()
        global_slot = granted[2]
        if global_slot is not None:
            slot.push_async_callback(self.store.release_global_slot, global_slot)
        if global_slot is None:
            blocked: Blocked = "slot"
        elif long_item and self.long_lane.locked():
            blocked = "lane"
        else:
            blocked = ""
            if long_item:
                await self.long_lane.acquire()  # free: returns without yielding
                held.callback(self.long_lane.release)
        if blocked:
            await slot.aclose()  # the in-flight slot goes back with the rest (the caller's give_back)
        return blocked, held, slot

    async def wait_until_free(self, blocked: Blocked, limits: ProviderLimits) -> None:
        """Wait (holding nothing) until what was busy looks free."""
        if blocked == "lane":
            await self.long_lane.acquire()  # FIFO; hand it straight on, we start over at the bucket
            self.long_lane.release()
        elif blocked == "lease":
            await self.store.wait_for_lease(limits)
        else:
            await self.store.wait_for_global_slot()

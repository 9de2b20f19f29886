"""The per-process in-flight cap and the cluster in-flight cap, over the provider concurrency leases.

One of ``global_max_in_flight`` slots for this whole process (all threads and event loops), counted in
memory; and, if ``cluster_max_in_flight`` > 0, one of that many slots across every worker: a lease on a
reserved name no provider slug can take, in the backend's lease table.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ..backoff import capped_exponential
from .leases import LEASE_POLL_MAX_S, LEASE_POLL_MIN_S, ConcurrencyLeases, Lease
from .types import ProviderLimits
from .wakeups import Wakeups

CLUSTER_LEASE_NAME = "*cluster*"  # not a valid provider slug, so it never collides
# the default per-process in-flight cap (the gateway passes its own: providers.limits.build_quota_store)
DEFAULT_GLOBAL_MAX_IN_FLIGHT = 64


@dataclass
class GlobalSlot:
    """One in-flight slot of this process (and the cluster lease, if a cluster cap is set)."""

    cluster_lease: Lease | None = None
    released: bool = False


def cluster_limits(cluster_max_in_flight: int) -> ProviderLimits | None:
    """The lease limits of the cluster-wide cap (None: no cap)."""
    if cluster_max_in_flight <= 0:
        return None
    return ProviderLimits(
        CLUSTER_LEASE_NAME,
        rpm=1,
        tpm=1,
        burst_seconds=1,
        max_concurrency=cluster_max_in_flight,
        timeout_seconds=50,
    )


class InFlightSlots:
    """This process's in-flight slots (and the cluster-wide ones, as leases of ``leases``)."""

    def __init__(
        self,
        leases: ConcurrencyLeases,
        global_max_in_flight: int | None = None,
        cluster_max_in_flight: int | None = None,
    ) -> None:
        if global_max_in_flight is None:
            global_max_in_flight = DEFAULT_GLOBAL_MAX_IN_FLIGHT
        if cluster_max_in_flight is None:
            cluster_max_in_flight = 0
        self.global_max_in_flight = int(global_max_in_flight)
        # Cluster-wide cap (0 = off): a lease on a reserved name that no provider slug can take.
        self.cluster_max_in_flight = int(cluster_max_in_flight)
        self._cluster_limits = cluster_limits(self.cluster_max_in_flight)
        self._leases = leases
        self._wakeups = Wakeups()
        self._lock = threading.Lock()
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @asynccontextmanager
    async def global_slot(self) -> AsyncIterator[None]:
        """One of ``global_max_in_flight`` slots for this whole process (all threads and event loops),
        and, if ``cluster_max_in_flight`` > 0, one of that many slots across every worker (a lease in
        the shared store). Waits for both. (The engine takes them without waiting: try_global_slot.)"""
        step, delay = 0, LEASE_POLL_MIN_S
        while True:
            with self._lock:
                if self._in_flight < self.global_max_in_flight:
                    self._in_flight += 1
                    break
            await self._wakeups.wait("global", delay)
            step += 1
            delay = capped_exponential(LEASE_POLL_MIN_S, LEASE_POLL_MAX_S, step)
        try:
            if self._cluster_limits is None:
                yield
            else:
                async with self._leases.lease(self._cluster_limits):
                    yield
        finally:
            self._give_back()

    async def try_global_slot(self) -> GlobalSlot | None:
        """Take an in-flight slot (and the cluster lease, if a cluster cap is set) if one is free right
        now, else None. Never waits. Give it back with ``release_global_slot``."""
        if not self.take_local():
            return None
        return await self.adopt()

    def local_hold(self) -> LocalSlotHold:
        """This process's slot, taken around each try of a grant (store.admit): held only while the
        store is asked, kept once it grants (``adopt``), given back when it refuses."""
        return LocalSlotHold(self)

    def take_local(self) -> bool:
        """This process's part of a slot, if one is free right now (no cluster lease)."""
        with self._lock:
            if self._in_flight >= self.global_max_in_flight:
                return False
            self._in_flight += 1
            return True

    async def wait_for_local(self) -> None:
        """Wait until this process has a free slot (woken at once by a release here). Takes nothing."""
        step, delay = 0, LEASE_POLL_MIN_S
        while self._in_flight >= self.global_max_in_flight:
            await self._wakeups.wait("global", delay)
            step += 1
            delay = capped_exponential(LEASE_POLL_MIN_S, LEASE_POLL_MAX_S, step)

    async def adopt(self) -> GlobalSlot | None:
        """The slot of a held local part (``take_local``), with the cluster lease if a cluster cap is
        set; None when that is busy (the local part given back)."""
        slot = GlobalSlot()
        if self._cluster_limits is None:
            return slot
        try:
            slot.cluster_lease = await self._leases.try_lease(self._cluster_limits)
        except BaseException:
            self._give_back()
            raise
        if slot.cluster_lease is None:
            self._give_back()
            return None
        return slot

    def give_back_local(self) -> None:
        """Give back a local part taken with ``take_local`` (not adopted)."""
        self._give_back()

    async def release_global_slot(self, slot: GlobalSlot) -> None:
        if slot.released:
            return
        slot.released = True
        try:
            if slot.cluster_lease is not None:
                assert self._cluster_limits is not None  # a cluster lease is only taken under a cluster cap
                await self._leases.release_lease(self._cluster_limits, slot.cluster_lease)
        finally:
            self._give_back()

    async def wait_for_global_slot(self) -> None:
        """Wait until an in-flight slot looks free (woken at once by a release in this process). Takes nothing."""
        await self.wait_for_local()
        if self._cluster_limits is not None:
            await self._leases.wait_for_lease(self._cluster_limits)

    def _give_back(self) -> None:
        with self._lock:
            self._in_flight -= 1
        self._wakeups.notify_one("global")


class LocalSlotHold:
    """This process's in-flight slot around one try of a grant (buckets.py ``_ask``: TokenAsk.hold):
    taken — waiting for one, holding nothing else — just before the store is asked, given back when the
    store refuses (a wait, a busy lease), kept when it grants. So a grant never finds the process's
    slots full after the fact (no grant and lease taken only to be given back), and no slot is held
    while a caller sleeps for a token."""

    def __init__(self, slots: InFlightSlots) -> None:
        self._slots = slots
        self.held = False

    async def take(self) -> None:
        while not self._slots.take_local():
            await self._slots.wait_for_local()
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self._slots.give_back_local()

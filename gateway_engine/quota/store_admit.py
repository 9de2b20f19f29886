"""The store's ``admit``: a bucket grant and the provider's concurrency lease in one atomic step of the
backend (lua.py ADMIT; local_buckets.py), with this process's in-flight slot held around each try, the
engine's way in (gateway_engine/admission.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .buckets import TokenBuckets
from .leases import ConcurrencyLeases, Lease
from .slots import GlobalSlot, InFlightSlots
from .team_quota import TeamQuota
from .types import Lane, ProviderLimits, Reservation


class LeaseGrants:
    """ComposedQuotaStore's ``admit`` over its ``buckets`` and ``lease_pool``."""

    buckets: TokenBuckets
    lease_pool: ConcurrencyLeases
    slots: InFlightSlots

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
        """``acquire`` and the provider's concurrency lease in one atomic step of the backend (lua.py
        ADMIT): waits for the buckets as acquire does; once they would grant, both the grant and the
        lease are taken, or — every lease held — neither, and LeaseBusy is raised (wait_for_lease, then
        ask again). The lease heartbeats until ``release_lease``. ProviderPaused: nothing taken.

        This process's in-flight slot (a local check) is taken just before each try and given back
        when the try is refused (slots.LocalSlotHold), so a grant comes with its slot: returned as the
        third value (``release_global_slot``), with the cluster cap's lease if one is set — None when
        that is busy (then only the grant and the lease are held: give them back and wait)."""
        hold = self.slots.local_hold()
        lease = self.lease_pool.new_lease(limits)
        try:
            reservation = await self.buckets.acquire(
                limits,
                tokens,
                current=current,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                lane=lane,
                step_aside=step_aside,
                team=team,
                current_team=current_team,
                lease_id=lease.lease_id,
                hold=hold,
            )
        except asyncio.CancelledError:
            self.lease_pool.forget(limits, lease)  # the ADMIT may have run before the cancel reached us
            raise
        self.lease_pool.hold(limits, lease)
        try:
            slot = await self.slots.adopt()
        except BaseException:
            await self.lease_pool.release_lease(limits, lease)
            await self.buckets.release(limits, reservation)
            raise
        return reservation, lease, slot

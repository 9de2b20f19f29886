"""The store's ``admit``: a bucket grant and the provider's concurrency lease in one atomic step of the
backend (lua.py ADMIT; local_buckets.py), the engine's way in (gateway_engine/admission.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .buckets import TokenBuckets
from .leases import ConcurrencyLeases, Lease
from .team_quota import TeamQuota
from .types import Lane, ProviderLimits, Reservation


class LeaseGrants:
    """ComposedQuotaStore's ``admit`` over its ``buckets`` and ``lease_pool``."""

    buckets: TokenBuckets
    lease_pool: ConcurrencyLeases

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
    ) -> tuple[Reservation, Lease]:
        """``acquire`` and the provider's concurrency lease in one atomic step of the backend (lua.py
        ADMIT): waits for the buckets as acquire does; once they would grant, both the grant and the
        lease are taken, or — every lease held — neither, and LeaseBusy is raised (wait_for_lease, then
        ask again). The lease heartbeats until ``release_lease``. ProviderPaused: nothing taken."""
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
            )
        except asyncio.CancelledError:
            self.lease_pool.forget(limits, lease)  # the ADMIT may have run before the cancel reached us
            raise
        self.lease_pool.hold(limits, lease)
        return reservation, lease

"""The in-process concurrency leases: a dict of lease id -> expiry per provider (the LEASE_* scripts'
semantics, lua.py), on the shared LocalState."""

from __future__ import annotations

import math

from .leases import ConcurrencyLeases
from .local_state import LocalState
from .types import ProviderLimits


def take_lease(leases: dict[str, float], limits: ProviderLimits, lease_id: str, now: float) -> int:
    """Take a lease of the provider's table if fewer than max_concurrency are live (expired ones are
    dropped): 0 taken, else ms until the earliest expires. The caller holds the state's lock."""
    for lid in [lid for lid, exp in leases.items() if exp <= now]:
        del leases[lid]
    if len(leases) < limits.max_concurrency:
        leases[lease_id] = now + limits.lease_ttl_seconds * 1000.0
        return 0
    return max(1, math.ceil(min(leases.values()) - now))


class LocalLeases(ConcurrencyLeases):
    """Lease tables of one process."""

    def __init__(self, state: LocalState) -> None:
        super().__init__()
        self._state = state

    async def try_take(self, limits: ProviderLimits, lease_id: str) -> int:
        with self._state.lock:
            now = self._state.now_ms()
            pause = self._state.pause(limits.name, now)
            if pause is not None:
                raise pause.refusal()
            return take_lease(self._state.cell(limits.name).leases, limits, lease_id, now)

    async def peek(self, limits: ProviderLimits) -> int:
        with self._state.lock:
            now = self._state.now_ms()
            live = [exp for exp in self._state.cell(limits.name).leases.values() if exp > now]
            if len(live) < limits.max_concurrency:
                return 0
            return max(1, math.ceil(min(live) - now))

    async def refresh(self, limits: ProviderLimits, lease_id: str) -> bool:
        with self._state.lock:
            now = self._state.now_ms()
            leases = self._state.cell(limits.name).leases
            if leases.get(lease_id, -1.0) <= now:
                leases.pop(lease_id, None)
                return False
            leases[lease_id] = now + limits.lease_ttl_seconds * 1000.0
            return True

    async def give_back(self, limits: ProviderLimits, lease_id: str) -> None:
        with self._state.lock:
            self._state.cell(limits.name).leases.pop(lease_id, None)

"""The Redis concurrency leases: a sorted set of lease id -> expiry per provider (LEASE_ACQUIRE,
LEASE_PEEK, LEASE_REFRESH of lua.py; a give-back is a plain ZREM)."""

from __future__ import annotations

from collections.abc import Awaitable

from .leases import ConcurrencyLeases
from .redis_conn import RedisConnection, pause_state
from .types import ProviderLimits


class RedisLeases(ConcurrencyLeases):
    """Lease tables in Redis, shared by every worker process."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__()
        self._conn = conn

    async def try_take(self, limits: ProviderLimits, lease_id: str) -> int:
        _, _, leases = self._conn.provider_keys(limits.name)
        ttl_ms = int(limits.lease_ttl_seconds * 1000)
        keys = [leases, self._conn.pause_key(limits.name)]
        reply = await self._conn.run("LEASE_ACQUIRE", keys, [lease_id, limits.max_concurrency, ttl_ms])
        if isinstance(reply, list):  # the provider is paused: nothing taken
            raise pause_state(limits.name, reply[1:]).refusal()
        return int(reply)

    async def peek(self, limits: ProviderLimits) -> int:
        _, _, leases = self._conn.provider_keys(limits.name)
        return int(await self._conn.run("LEASE_PEEK", [leases], [limits.max_concurrency]))

    async def refresh(self, limits: ProviderLimits, lease_id: str) -> bool:
        _, _, leases = self._conn.provider_keys(limits.name)
        ttl_ms = int(limits.lease_ttl_seconds * 1000)
        return int(await self._conn.run("LEASE_REFRESH", [leases], [lease_id, ttl_ms])) == 1

    def give_back(self, limits: ProviderLimits, lease_id: str) -> Awaitable[None]:
        # not `async def`: ZREM is on the wire before the caller first awaits, even if it is cancelled
        _, _, leases = self._conn.provider_keys(limits.name)
        return self._conn.command("ZREM", leases, lease_id)

"""The Redis quota store: buckets, leases, budgets and the config version shared by every worker process
(the scripts: lua.py; the connection: redis_conn.py)."""

from __future__ import annotations

from collections.abc import Awaitable

from .config_version import RedisConfigVersion
from .redis_buckets import RedisTokenBuckets
from .redis_conn import RedisConnection
from .redis_leases import RedisLeases
from .redis_ledger import RedisBudgetLedger
from .resp import Arg, Reply, RespClient
from .store import ComposedQuotaStore
from .types import SettleOutcome


class RedisQuotaStore(ComposedQuotaStore):
    backend = "redis"

    def __init__(
        self,
        url: str,
        prefix: str = "bgw:",
        global_max_in_flight: int | None = None,
        command_timeout: float = 5.0,
        connect_timeout: float = 2.0,
        cluster_max_in_flight: int | None = None,
    ):
        self.connection = RedisConnection(url, prefix, command_timeout, connect_timeout)
        super().__init__(
            RedisTokenBuckets(self.connection),
            RedisLeases(self.connection),
            RedisBudgetLedger(self.connection),
            RedisConfigVersion(self.connection),
            global_max_in_flight,
            cluster_max_in_flight,
        )

    @property
    def url(self) -> str:
        return self.connection.url

    @property
    def prefix(self) -> str:
        return self.connection.prefix

    def folds(self, also: SettleOutcome) -> bool:
        """A step of the same Redis server runs inside the SETTLE script (its key in the provider's slot)."""
        return also.url == self.url

    def client(self) -> RespClient:
        """This event loop's connection."""
        return self.connection.client()

    async def aclose(self) -> None:
        """Close this event loop's connection (call at the end of each asyncio.run)."""
        await self.connection.aclose()

    def command(self, *args: Arg) -> Awaitable[Reply]:
        """One plain Redis command on this loop's connection, sent at once (pipelined with whatever is
        sent before its reply is awaited); QuotaStoreUnavailable when Redis is unreachable. For the
        attempt journal (gateway_engine.journal), which lives beside the buckets."""
        return self.connection.command(*args)

    async def ping(self) -> bool:
        return await self.connection.ping()

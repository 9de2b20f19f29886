"""The Redis budget ledger: one string per team and UTC period, expiring a little after the period
(BUDGET_RESERVE and BUDGET_ADJUST of lua.py; plain MGET / SET NX EX / DEL otherwise)."""

from __future__ import annotations

from .ledger import BudgetLedger
from .redis_conn import RedisConnection


class RedisBudgetLedger(BudgetLedger):
    """Budget counters in Redis, shared by every worker process."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    def key(self, team: str, suffix: str) -> str:
        return f"{self._conn.prefix}budget:{{{team}}}:{suffix}"

    async def try_reserve(self, keys: list[str], tokens: int, limits: list[int]) -> tuple[int, int, int]:
        reply = await self._conn.run("BUDGET_RESERVE", keys, [int(tokens), *limits])
        status = int(reply[0])
        return status, (int(reply[1]) - 1 if status else 0), (int(reply[2]) if status == 1 else 0)

    async def adjust(self, keys: list[str], delta: int) -> None:
        await self._conn.run("BUDGET_ADJUST", keys, [int(delta)])

    async def get(self, keys: list[str]) -> list[int | None]:
        values = await self._conn.command("MGET", *keys)
        return [None if v is None else int(v) for v in values]

    async def delete(self, keys: list[str]) -> None:
        await self._conn.command("DEL", *keys)

    async def seed(self, key: str, used: int, ttl_seconds: int) -> None:
        await self._conn.command("SET", key, int(used), "NX", "EX", max(1, int(ttl_seconds)))

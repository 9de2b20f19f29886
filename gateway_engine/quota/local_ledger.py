"""The in-process budget ledger: a dict of "team:suffix" -> tokens used (the BUDGET_* scripts' semantics,
lua.py). Keys never expire here: a period's key is simply not asked for once the period is over."""

from __future__ import annotations

import threading

from .ledger import BudgetLedger


class LocalBudgetLedger(BudgetLedger):
    """Budget counters of one process."""

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self._lock = lock or threading.Lock()
        self._ledger: dict[str, int] = {}

    def key(self, team: str, suffix: str) -> str:
        return f"{team}:{suffix}"

    async def try_reserve(self, keys: list[str], tokens: int, limits: list[int]) -> tuple[int, int, int]:
        with self._lock:
            for i, key in enumerate(keys):
                if key not in self._ledger:
                    return 2, i, 0
            for i, (key, limit) in enumerate(zip(keys, limits, strict=True)):
                if limit >= 0 and self._ledger[key] + tokens > limit:
                    return 1, i, self._ledger[key]
            for key in keys:
                self._ledger[key] += tokens
            return 0, 0, 0

    async def adjust(self, keys: list[str], delta: int) -> None:
        with self._lock:
            for key in keys:
                if key in self._ledger:
                    self._ledger[key] = max(0, self._ledger[key] + delta)

    async def get(self, keys: list[str]) -> list[int | None]:
        with self._lock:
            return [self._ledger.get(key) for key in keys]

    async def seed(self, key: str, used: int, ttl_seconds: int) -> None:
        with self._lock:
            self._ledger.setdefault(key, int(used))

    async def delete(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._ledger.pop(key, None)

"""Interactive first: the marks that make batch asks yield to interactive callers (docs/engine.md,
"Interactive first").

While at least one interactive caller of this process waits for a provider (its bucket grant or a
concurrency lease), the process holds one mark on that provider in the store — one per (process,
provider), not per caller — renewed every ``RENEW_S`` and lasting ``TTL_MS``, so a process that dies
stops holding batch traffic back within ``TTL_MS``. Every batch ask (ACQUIRE with lane "batch", in
every worker) finds the mark and is told to wait ``YIELD_MS``; the interactive callers take the grants.
The last waiter to leave removes the mark at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

TTL_MS = 2000
RENEW_S = 0.5

Mark = Callable[[str, str, int], Awaitable[None]]  # (provider, member, ttl_ms)
Unmark = Callable[[str, str], Awaitable[None]]  # (provider, member)


@dataclass
class _Held:
    waiters: int
    renewer: asyncio.Task[None]


class InteractiveMarks:
    """This process's marks, one per provider with waiting interactive callers (one event loop each:
    the members carry the loop's own id, so two loops never share a count)."""

    def __init__(self, mark: Mark, unmark: Unmark) -> None:
        self._mark, self._unmark = mark, unmark
        self._held: dict[tuple[int, str], _Held] = {}
        self.member_prefix = uuid.uuid4().hex[:12]

    def _member(self) -> str:
        return f"{self.member_prefix}:{id(asyncio.get_running_loop()):x}"

    @contextlib.asynccontextmanager
    async def waiting(self, provider: str) -> AsyncIterator[None]:
        """Hold this process's mark on ``provider`` while the body runs (the caller waits there)."""
        key = (id(asyncio.get_running_loop()), provider)
        member = self._member()
        held = self._held.get(key)
        if held is None:
            await self._mark(provider, member, TTL_MS)  # the store down: raised to the caller, nothing held
            held = self._held.get(key)  # another caller of this loop may have marked meanwhile
            if held is None:
                renewer = asyncio.get_running_loop().create_task(self._renew(provider, member))
                held = self._held[key] = _Held(0, renewer)
        held.waiters += 1
        try:
            yield
        finally:
            held.waiters -= 1
            if held.waiters == 0 and self._held.get(key) is held:
                del self._held[key]
                held.renewer.cancel()
                try:
                    await self._unmark(provider, member)
                except Exception:  # noqa: BLE001 - the mark expires by itself within TTL_MS
                    log.warning("could not remove the interactive mark on %s; it expires", provider)

    async def _renew(self, provider: str, member: str) -> None:
        while True:
            await asyncio.sleep(RENEW_S)
            try:
                await self._mark(provider, member, TTL_MS)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the store is down: the waiters see it on their own asks
                log.warning("could not renew the interactive mark on %s", provider)

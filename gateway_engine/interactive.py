"""The interactive lane: one call at a time, in-process, on the same quota pool as the batches.

``InteractiveLane`` is one process's (one event loop's) engine for ``/v1/chat/completions``: every call
is a one-item run through the very parts a batch item goes through — routing and fallbacks, the
breaker, admission (budget → bucket token → lease → in-flight slot, in the ``interactive`` lane: batch
asks of every worker yield while one of its callers waits, quota/priority.py), the send, retries and
the outcome recording — with no Celery hop. A call's ``deadline`` bounds its wait for quota (the
caller's max wait): past it the call ends ``expired`` without being sent again.

``complete`` answers a plain call; ``open_stream`` a streaming one: retries and fallbacks happen until
the first chunk is in, then the stream is the caller's (``OpenStream``; its lease and slot are held)
until ``end_stream``.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

from .admission import Admission
from .attempts import Finished, ItemLife, OpenStream
from .context import RunContext
from .http import HttpClients
from .items import ItemResult, WorkItem
from .journal import NULL_JOURNAL
from .live_limits import LiveLimits
from .observer import NULL_OBSERVER, EngineObserver
from .options import EngineOptions
from .outage import OutageRide
from .outcomes import HttpOutcome
from .protocols import Breaker, LimitsProvider, QuotaStore
from .routing import RoutingTable
from .stopping import Stopping

__all__ = ["InteractiveLane"]

TableSource = Callable[[], Awaitable[RoutingTable]]
ObserverFactory = Callable[[RoutingTable], Awaitable[EngineObserver | None]]


class InteractiveLane:
    """The interactive calls of one event loop (create it inside that loop)."""

    def __init__(
        self,
        table: TableSource,
        *,
        store: QuotaStore,
        breaker: Breaker,
        limits_source: LimitsProvider | None,
        options: EngineOptions,
        observer_for: ObserverFactory | None = None,
    ) -> None:
        self._table = table
        self.store, self.breaker, self.options = store, breaker, options
        self.limits_source = limits_source
        self._observer_for = observer_for
        self.http = HttpClients(max_answer_bytes=options.max_answer_bytes)
        self.limits = LiveLimits(limits_source)
        self.stopping = Stopping(None, None)
        self.admission = Admission(store, self.limits, options)
        self._ride = OutageRide(options)
        self._life: tuple[RoutingTable, ItemLife] | None = None
        self._rng = random.Random(options.seed)

    async def table(self) -> RoutingTable:
        """The routing table calls are routed with now."""
        return await self._table()

    async def _item_life(self) -> ItemLife:
        """The item life for the current routing table (rebuilt when the table changed)."""
        table = await self._table()
        held = self._life
        if held is not None and held[0] is table:
            return held[1]
        ctx = RunContext(
            table,
            self.store,
            self.breaker,
            self.options,
            self.limits_source,
            NULL_JOURNAL,
            (await self._observer_for(table) if self._observer_for is not None else None) or NULL_OBSERVER,
            self.http,
            rng=self._rng,
        )
        life = ItemLife(ctx, self.admission, self.limits, self.stopping, self._ride, lane="interactive")
        self._life = (table, life)
        return life

    async def complete(self, item: WorkItem) -> ItemResult:
        """A plain call: its final result (the in-flight slot is given back before returning)."""
        life = await self._item_life()
        finished = await life.run(item)
        if finished.slot is not None:
            await finished.slot.aclose()
        life.ctx.observer.on_item_done(finished.result, team=item.team)
        return finished.result

    async def open_stream(self, item: WorkItem) -> Finished:
        """A streaming call: ``Finished.stream`` set when it streams (read ``stream.outcome.stream``,
        then ``end_stream``), else its final (failed) result with nothing held."""
        life = await self._item_life()
        finished = await life.run(item, stream=True)
        if finished.stream is None:
            if finished.slot is not None:
                await finished.slot.aclose()
            life.ctx.observer.on_item_done(finished.result, team=item.team)
        return finished

    async def end_stream(self, stream: OpenStream, final: HttpOutcome) -> ItemResult:
        """The stream is over (``final``: how it ended): record it, give everything back."""
        held = self._life
        life = held[1] if held is not None else await self._item_life()
        result = await life.end_stream(stream, final)
        life.ctx.observer.on_item_done(result, team=stream.state.item.team)
        return result

    async def aclose(self) -> None:
        await self.http.aclose()

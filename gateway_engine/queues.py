"""One run's items, queued per preferred provider, and the workers that serve them.

Items are dispatched per preferred provider (one small worker pool per provider, sized from the
provider's ``max_concurrency``), so an empty bucket at provider A never delays provider B. A list is
served shortest first (estimated tokens; ties in input order), so short items are not stuck behind long
ones; an async source (``ItemFeed``) is served FIFO per provider as items arrive, until it ends.

An item that has to wait — a backoff or Retry-After, or every candidate's breaker open — is **parked**:
it leaves its worker (which serves the next item of the queue) and sleeps on its own, holding nothing;
when the wait is over it goes back to the head of its queue. So the items waiting out a broken
provider never stand between that provider's other items and its breaker, and when the run drains
(its caller's slice ends) parked items are given back at once (``released``, with what they spent)
instead of keeping the run open (docs/engine.md "Failure isolation").
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, Iterable

from .attempts import Finished, ItemLife, ItemState, Wait
from .context import RunContext
from .items import ItemResult, RawItem, WorkItem, item_estimate
from .protocols import ItemSource, ResultSink
from .routing import preferred_provider

__all__ = ["ProviderQueues"]


class ProviderQueues:
    """One ``abatch`` call's items per preferred provider; ``serve_item`` runs one item to its end."""

    def __init__(self, ctx: RunContext, life: ItemLife, on_result: ResultSink | None) -> None:
        self.ctx, self.life, self.on_result = ctx, life, on_result
        self.work: list[WorkItem] = []
        self.results: list[ItemResult | None] = []
        self.queues: dict[str, deque[int]] = {}
        self.resumed: dict[int, ItemState] = {}  # items back from a wait: their state so far
        self.alive: dict[str, int] = {}

    def preferred(self, item: WorkItem) -> str:
        """The item's first candidate (the queue it waits in); "" when it cannot be routed."""
        return preferred_provider(
            self.ctx.table, route=item.route, provider=item.provider,
            salt=item.batch_id or self.ctx.salt, key=item.key or item.custom_id, prefer=item.prefer,
        )  # fmt: skip

    def workers(self, name: str) -> int:
        """How many items of provider ``name``'s queue may be between "routed" and "done" at once."""
        config = self.ctx.table.providers.get(name)
        concurrency = config.max_concurrency if config else 1
        opts = self.ctx.options
        return max(opts.provider_workers_min, opts.provider_workers_factor * concurrency)

    def add(self, raw: object) -> str:
        """Queue one item behind its preferred provider; returns that provider ("" when not routable)."""
        index = len(self.work)
        item = WorkItem.coerce(raw, index)
        self.work.append(item)
        self.results.append(None)
        name = self.preferred(item)
        self.queues.setdefault(name, deque()).append(index)
        return name

    def shortest_first(self) -> None:
        """Order every queue by estimated tokens (ties: input order)."""
        default = self.ctx.options.default_max_tokens
        for name, queue in self.queues.items():
            est = {i: sum(item_estimate(self.work[i], default)) for i in queue}
            self.queues[name] = deque(sorted(queue, key=lambda i: (est[i], i)))

    def staff(self, tg: asyncio.TaskGroup, name: str) -> None:
        """Start workers for ``name``'s queue, up to the provider's worker count."""
        for _ in range(min(len(self.queues[name]), self.workers(name) - self.alive.get(name, 0))):
            self.alive[name] = self.alive.get(name, 0) + 1  # at creation: items added before it runs see it
            tg.create_task(self.worker(name, tg))

    async def worker(self, name: str, tg: asyncio.TaskGroup) -> None:
        queue = self.queues[name]  # counted in ``alive`` by staff() when created
        try:
            while queue:
                index = queue.popleft()
                state = self.resumed.pop(index, None) or self.life.begin(self.work[index])
                step = state if isinstance(state, Finished) else await self.life.advance(state)
                if isinstance(step, Wait):
                    assert isinstance(state, ItemState)
                    tg.create_task(self.parked(tg, name, index, state, step))
                    continue
                await self.finish(index, step)
        finally:
            self.alive[name] -= 1

    async def parked(
        self, tg: asyncio.TaskGroup, name: str, index: int, state: ItemState, wait: Wait
    ) -> None:
        """Sleep out an item's wait outside the queue's workers, then put it back at the queue's head
        (or finish it: given back because the run drains, or stopped)."""
        stopping = self.life.stopping
        stopping.note_parked(index, True)
        try:
            done = await self.life.wait_out(state, wait, parked=True)
        finally:
            stopping.note_parked(index, False)
        if done is not None:
            await self.finish(index, done)
            return
        self.resumed[index] = state
        self.queues[name].appendleft(index)
        self.staff(tg, name)

    async def finish(self, index: int, finished: Finished) -> None:
        """Keep the result, tell the observer and the caller; the in-flight slot goes back after that."""
        result, item = finished.result, self.work[index]
        self.results[index] = result
        self.ctx.observer.on_item_done(result, team=item.team, batch_id=item.batch_id)
        try:
            if self.on_result is not None:
                await self.on_result(index, result)
        finally:
            if finished.slot is not None:
                await finished.slot.aclose()

    async def serve(self, tg: asyncio.TaskGroup, items: Iterable[RawItem] | ItemSource) -> None:
        """A list: grouped per preferred provider, shortest first. An async source: FIFO per provider as
        items arrive, until it ends."""
        if isinstance(items, AsyncIterable):
            async for raw in items:
                self.staff(tg, self.add(raw))
            return
        for raw in items:
            self.add(raw)
        self.shortest_first()
        for name in self.queues:
            self.staff(tg, name)

    def final(self) -> list[ItemResult]:
        final = [r for r in self.results if r is not None]
        assert len(final) == len(self.work), "every item gets exactly one result"
        return final

"""``ItemFeed``: an async item source filled from another thread (the gateway's dispatcher puts the items
it claims, in fair order, while the run goes on; the run serves them FIFO per provider)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Iterable

from .items import RawItem

__all__ = ["ItemFeed"]


class _End:
    """The end-of-feed marker (``ItemFeed.close``)."""


class ItemFeed:
    """An async item source filled from another thread: ``put(items)``, then ``close()`` to end it."""

    _END = _End()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._early: list[RawItem | _End] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[RawItem | _End] | None = None
        self.closed = False

    def put(self, items: Iterable[RawItem]) -> None:
        self._send(list(items))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._send([self._END])

    def _send(self, batch: list[RawItem | _End]) -> None:
        with self._lock:
            if self._loop is None:
                self._early.extend(batch)
                return
            loop, queue = self._loop, self._queue
        assert queue is not None
        try:
            loop.call_soon_threadsafe(_put_all, queue, batch)
        except RuntimeError:  # the run is over
            pass

    def __aiter__(self) -> AsyncIterator[RawItem]:
        return self._iterate()

    async def _iterate(self) -> AsyncGenerator[RawItem, None]:
        queue: asyncio.Queue[RawItem | _End] = asyncio.Queue()
        with self._lock:
            self._loop, self._queue = asyncio.get_running_loop(), queue
            early, self._early = self._early, []
        for x in early:
            queue.put_nowait(x)
        while True:
            x = await queue.get()
            if isinstance(x, _End):
                return
            yield x


def _put_all(queue: asyncio.Queue[RawItem | _End], batch: list[RawItem | _End]) -> None:
    for x in batch:
        queue.put_nowait(x)

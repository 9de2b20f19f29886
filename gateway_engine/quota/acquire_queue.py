"""The FIFO line of callers waiting for one provider's buckets, per event loop (see TokenBuckets.acquire).

While nobody waits, callers go straight to the store. Once a caller is told to wait, callers of that
provider in this event loop line up here and only the head asks the store: N waiters cost one store
call per grant instead of N, and a large request is not overtaken by smaller ones that arrived after it.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import weakref
from typing import TypeAlias

# the callers of one provider waiting for its buckets in one event loop, FIFO
AcquireQueue: TypeAlias = "collections.deque[asyncio.Future[None]]"


class AcquireQueues:
    """Every provider's line of waiters, per running event loop (a loop's lines go with the loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AcquireQueue]] = (
            weakref.WeakKeyDictionary()
        )

    def waiting(self, loop: asyncio.AbstractEventLoop, name: str) -> AcquireQueue | None:
        """The provider's queue of waiters in this loop, if there is one (may be empty)."""
        queues = self._queues.get(loop)
        return None if queues is None else queues.get(name)

    def queue(self, loop: asyncio.AbstractEventLoop, name: str) -> AcquireQueue:
        """The provider's queue of waiters in this loop, created if needed."""
        queues = self._queues.get(loop)
        if queues is None:
            with self._lock:
                queues = self._queues.setdefault(loop, {})
        queue = queues.get(name)
        if queue is None:
            queue = queues[name] = collections.deque()
        return queue

    def leave(
        self, loop: asyncio.AbstractEventLoop, name: str, queue: AcquireQueue, me: asyncio.Future[None]
    ) -> None:
        """``me`` leaves the line; if it was the head, the next waiter becomes the head (woken)."""
        was_head = queue[0] is me
        queue.remove(me)
        if was_head and queue and not queue[0].done():
            queue[0].set_result(None)  # a cancelled next head wakes its successor itself
        queues = self._queues.get(loop)
        if not queue and queues is not None and queues.get(name) is queue:
            del queues[name]

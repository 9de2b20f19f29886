"""In-process wake-ups: a waiter for a concurrency lease or an in-flight slot is woken at once (FIFO)
when a holder in this process gives one back, instead of waiting for its next poll of the store."""

from __future__ import annotations

import asyncio
import threading


class Wakeups:
    """FIFO wake-ups keyed by name, safe across threads and event loops (one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, dict[asyncio.Future[None], None]] = {}

    async def wait(self, key: str, timeout: float) -> bool:
        """Wait until woken (True) or ``timeout`` seconds passed (False)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            self._waiters.setdefault(key, {})[fut] = None
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.pop(fut, None)
                    if not waiters:
                        del self._waiters[key]

    def notify_one(self, key: str) -> None:
        while True:
            with self._lock:
                waiters = self._waiters.get(key)
                if not waiters:
                    return
                fut = next(iter(waiters))
                del waiters[fut]
            if fut.done():
                continue
            try:
                fut.get_loop().call_soon_threadsafe(_resolve, fut)
                return
            except RuntimeError:  # that loop is closed: wake the next waiter
                continue

    def notify_all(self, key: str) -> None:
        """Wake every waiter of ``key`` (in any thread or event loop of the process)."""
        with self._lock:
            waiters = self._waiters.pop(key, {})
        for fut in waiters:
            if fut.done():
                continue
            try:
                fut.get_loop().call_soon_threadsafe(_resolve, fut)
            except RuntimeError:  # that loop is closed: nobody to wake there
                continue


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

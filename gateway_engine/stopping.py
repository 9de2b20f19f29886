"""Stopping, in one place: why an item must not (re)try now, and the bounded waits that end early.

An item with a ``deadline`` that passes before it is sent — waiting for quota, a breaker or a backoff —
ends ``expired`` (attempts already made stay recorded). ``RunControl`` lets the caller cancel one batch
or drain the run (items not sent yet come back ``released``, to be queued again) or stop it for a
shutdown (items waiting to retry are released too); waiting items wake at once on either. ``Stopping``
is one run's side of it: every wait of an item goes through ``bounded``/``sleep`` and re-checks
``stop_reason`` when woken.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .items import ItemResult, WorkItem
from .retry import ErrorType

__all__ = ["RunControl", "Stopping"]

_T = TypeVar("_T")


class RunControl:
    """Thread-safe handle on a running ``abatch``: cancel one batch's unsent items, drain the run
    (items not sent yet end ``released``) or stop it (``stop``: items waiting to retry are released
    too). Waiting items wake at once."""

    def __init__(self) -> None:
        self.cancelled_batches: set[str] = set()
        self.draining = False
        self.stopping = False
        self._lock = threading.Lock()
        self._parked: set[int] = set()  # run indices of items parked (waiting out a breaker or backoff)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poke: Callable[[], None] | None = None

    def bind(self, loop: asyncio.AbstractEventLoop, poke: Callable[[], None]) -> None:
        with self._lock:
            self._loop, self._poke = loop, poke

    def cancel_batch(self, batch_id: str) -> None:
        self.cancelled_batches = self.cancelled_batches | {batch_id}
        self._wake()

    def drain(self) -> None:
        self.draining = True
        self._wake()

    def stop(self) -> None:
        """Drain for a shutdown: also items waiting to retry (backoff, Retry-After, a quota wait) end
        ``released``, with their attempts so far; only calls in flight are waited for."""
        self.stopping = True
        self.drain()

    def note_parked(self, index: int, parked: bool) -> None:
        """The engine: item ``index`` of the run waits out a breaker or a backoff (parked, holding no
        worker, slot or lease), or no longer does."""
        with self._lock:
            (self._parked.add if parked else self._parked.discard)(index)

    def parked(self) -> frozenset[int]:
        """The run indices of the items parked right now (the dispatcher does not count them against
        their provider's claim buffer)."""
        with self._lock:
            return frozenset(self._parked)

    def _wake(self) -> None:
        with self._lock:
            loop, poke = self._loop, self._poke
        if loop is not None and poke is not None:
            try:
                loop.call_soon_threadsafe(poke)
            except RuntimeError:  # the loop is closed: nothing waits any more
                pass


class Stopping:
    """One run's stop rules (bound to its event loop): the caller's ``should_cancel`` and
    ``RunControl``, items' deadlines, and the waits they cut short."""

    def __init__(self, should_cancel: Callable[[], bool] | None, control: RunControl | None) -> None:
        self.should_cancel = should_cancel or (lambda: False)
        self.control = control
        self.wake = asyncio.Event()  # replaced by a fresh one each time it is set (see poke)
        if control is not None:
            control.bind(asyncio.get_running_loop(), self.poke)

    def poke(self) -> None:
        """Wake every bounded wait (a batch was cancelled or the run drains); they re-check why."""
        wake, self.wake = self.wake, asyncio.Event()
        wake.set()

    def stop_reason(self, item: WorkItem, result: ItemResult) -> str | None:
        """Why this item must not (re)try now: expired (deadline passed, sent or not), cancelled or
        released (draining) — the last two only before its first send —, or released after attempts
        when the run stops for a shutdown (its attempts travel with the released result)."""
        if item.deadline is not None and time.time() >= item.deadline:
            return "expired"
        if result.attempts:
            control = self.control
            return "released" if control is not None and control.stopping else None
        if self.should_cancel():
            return "cancelled"
        control = self.control
        if control is not None:
            if item.batch_id and item.batch_id in control.cancelled_batches:
                return "cancelled"
            if control.draining:
                return "released"
        return None

    async def bounded(self, coro: Awaitable[_T], item: WorkItem) -> tuple[bool, _T | None]:
        """Await ``coro`` unless the item's deadline passes or the run is poked first.
        Returns (finished, value); when not finished the coroutine was cancelled (value: what it
        returned anyway if it won the race, else None)."""
        timeout = None if item.deadline is None else max(0.0, item.deadline - time.time())
        if timeout is None and self.control is None:
            return True, await coro
        task = asyncio.ensure_future(coro)
        waker = asyncio.ensure_future(self.wake.wait())
        try:
            done, _ = await asyncio.wait({task, waker}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            raise
        finally:
            waker.cancel()
        if task in done:
            return True, task.result()
        task.cancel()
        value: _T | None
        try:
            value = await task
        except asyncio.CancelledError:
            if not task.cancelled():  # we were cancelled ourselves
                raise
            value = None
        return False, value

    @property
    def draining(self) -> bool:
        """The run drains (its caller asked for it, or stops): parked items are given back."""
        return self.control is not None and self.control.draining

    def note_parked(self, index: int, parked: bool) -> None:
        if self.control is not None:
            self.control.note_parked(index, parked)

    async def sleep(
        self,
        seconds: float,
        item: WorkItem,
        result: ItemResult,
        *,
        parked: bool = False,
        wake: Callable[[float], Awaitable[bool]] | None = None,
    ) -> None:
        """Sleep, waking early when the item has to stop (deadline, cancel, drain), when ``wake(left)``
        (a wait that returns True on its event: a pause of the provider) was woken, or, for a
        ``parked`` item (one that waits out a breaker or a backoff), as soon as the run drains."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            if parked and self.draining:
                return
            nap = asyncio.sleep(left, False) if wake is None else wake(left)
            finished, woken = await self.bounded(nap, item)
            if finished and woken:
                return
            if not finished and (self.stop_reason(item, result) or (parked and self.draining)):
                return

    @staticmethod
    def end(result: ItemResult, reason: str) -> ItemResult:
        """The item stops without another send: cancelled, released or expired."""
        result.status = reason
        if reason == "cancelled":
            result.error_type = ErrorType.CANCELLED
            result.error_message = "batch cancelled before the item was sent"
        elif reason == "expired":
            last = f"; last error: {result.error_message}" if result.error_message else ""
            result.error_type = ErrorType.EXPIRED
            result.error_message = (
                f"deadline passed before the item was sent{last}"
                if not result.attempts
                else f"deadline passed after {result.attempts} attempt(s), before a retry{last}"
            )
        return result

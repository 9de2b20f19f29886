"""Waiting for something to happen: poll a condition with a generous deadline, never sleep-then-assert.

A fixed sleep followed by an assertion fails on a loaded machine when the thing takes longer than the
sleep, and wastes the rest of the sleep when it is quick. ``wait_until`` returns as soon as the
condition holds and fails only when it has not held for ``timeout`` seconds, which is meant to catch a
hang, not to measure speed (timing rules go on tests.clock.FakeClock; speed goes to bench/).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _failure(what: str, timeout: float, on_fail: Callable[[], str] | None) -> AssertionError:
    detail = on_fail() if on_fail is not None else ""
    return AssertionError(
        f"timed out after {timeout:g} s waiting for {what}" + (f"\n{detail}" if detail else "")
    )


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.05,
    *,
    what: str = "the condition",
    on_fail: Callable[[], str] | None = None,
) -> T:
    """Call ``predicate()`` every ``interval`` seconds until it returns something truthy; return that.

    Raises AssertionError naming ``what`` (plus ``on_fail()``, e.g. a worker's log) if it is still
    falsy after ``timeout`` seconds. The predicate is always asked once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, on_fail)
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 30.0,
    interval: float = 0.01,
    *,
    what: str = "the condition",
    on_fail: Callable[[], str] | None = None,
) -> T:
    """``wait_until`` inside an event loop: the predicate may be a plain or an async callable."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, on_fail)
        await asyncio.sleep(interval)

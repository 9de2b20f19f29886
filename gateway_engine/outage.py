"""Riding through an outage of a dependency: the one backoff rule, and the engine's ride over the quota
store and the breaker (Redis down).

The rule (``OutageBackoff``): after a failure wait ``min_delay`` (0.2 s), doubling up to ``max_delay``
(2 s), and give up once the next wait would end past ``limit_seconds`` after the first failure (or
after ``start_now``). The engine's ``OutageRide`` applies it to every quota-store, breaker and journal
call of a run (``EngineOptions.store_outage_seconds``); the gateway's database steps
(``batches.execution.common.ride_through``) apply the same rule with GATEWAY_OUTAGE_RIDE_SECONDS.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from .backoff import capped_exponential
from .breaker import BreakerUnavailable
from .options import EngineOptions
from .protocols import Clock
from .quota.types import QuotaStoreUnavailable

__all__ = ["OutageBackoff", "OutageRide", "is_store_failure"]

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")


def is_store_failure(exc: BaseException) -> bool:
    """The quota store or the breaker is unreachable (what the engine rides through)."""
    return isinstance(exc, (QuotaStoreUnavailable, BreakerUnavailable))


class OutageBackoff:
    """The waits between tries while a dependency is down, and when to give up."""

    def __init__(
        self,
        limit_seconds: float,
        *,
        min_delay: float = 0.2,
        max_delay: float = 2.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.limit_seconds = limit_seconds
        self.min_delay, self.max_delay = min_delay, max_delay
        self.clock = clock
        self.tries = 0  # failures waited out so far: the growth's step
        self.give_up_at: float | None = None

    def start_now(self) -> OutageBackoff:
        """Count the limit from now rather than from the first failure."""
        self.give_up_at = self.clock() + self.limit_seconds
        return self

    def next_delay(self) -> float | None:
        """After a failure: how long to wait before the next try, or None when it is time to give up."""
        now = self.clock()
        if self.give_up_at is None:
            self.give_up_at = now + self.limit_seconds
        delay = capped_exponential(self.min_delay, self.max_delay, self.tries)
        if now + delay > self.give_up_at:
            return None
        self.tries += 1
        return delay


class OutageRide:
    """One run's calls to the quota store, the breaker and the journal: while the store is unreachable
    each call waits (``OutageBackoff`` from ``EngineOptions``, logged loudly at most once a second per
    run) for at most ``store_outage_seconds``, then raises the store's error."""

    def __init__(self, options: EngineOptions, clock: Clock = time.monotonic) -> None:
        self.options = options
        self.clock = clock
        self.logged_at = -1e9

    async def __call__(
        self, what: str, fn: Callable[_P, Awaitable[_T]], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        backoff: OutageBackoff | None = None
        while True:
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                if not is_store_failure(exc):
                    raise
                if backoff is None:
                    backoff = self._backoff()
                delay = backoff.next_delay()
                if delay is None:
                    raise
                self._log(what, exc)
                await asyncio.sleep(delay)

    def _backoff(self) -> OutageBackoff:
        opts = self.options
        return OutageBackoff(
            opts.store_outage_seconds,
            min_delay=opts.store_retry_min_seconds,
            max_delay=opts.store_retry_max_seconds,
            clock=self.clock,
        )

    def _log(self, what: str, exc: Exception) -> None:
        now = self.clock()
        if now - self.logged_at >= 1.0:
            self.logged_at = now
            log.error("%s: quota store unavailable (%s); items paused, retrying", what, exc)

"""Provider concurrency leases: the abstract base, with the waiting and the heartbeats both backends share.

A backend implements four atomic primitives on a provider's lease table (``try_take``, ``peek``,
``refresh``, ``give_back``): a Redis sorted set (redis_leases.py) or a dict (local_leases.py). A lease
expires after ``limits.lease_ttl_seconds`` unless its holder's heartbeat renews it, so the slot of a
holder that died returns by itself.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from ..backoff import capped_exponential
from .types import ProviderLimits
from .wakeups import Wakeups

log = logging.getLogger(__name__)

# Lease waiting: poll the shared store with exponential backoff (cross-process), and get woken at once
# when a lease is released inside this process.
LEASE_POLL_MIN_S = 0.002
LEASE_POLL_MAX_S = 0.1

HeartbeatHandle = asyncio.TimerHandle | asyncio.Task[None]


@dataclass
class Lease:
    provider: str
    lease_id: str
    lost: bool = False  # set if a heartbeat found the lease gone (holder stalled longer than the TTL)
    # "timer" (until the first heartbeat) and "task" (the heartbeat loop), cancelled on release
    _heartbeat: dict[str, HeartbeatHandle] = field(default_factory=dict, repr=False, compare=False)

    def keep_heartbeat(self, kind: str, handle: HeartbeatHandle) -> None:
        """Hold the heartbeat's ``kind`` ("timer" or "task") handle until stop_heartbeat."""
        self._heartbeat[kind] = handle

    def stop_heartbeat(self) -> None:
        """Cancel the heartbeat timer and loop, if any (the lease is being given back)."""
        timer = self._heartbeat.pop("timer", None)
        if timer is not None:
            timer.cancel()
        task = self._heartbeat.pop("task", None)
        if task is not None:
            task.cancel()


class ConcurrencyLeases(ABC):
    """Per-provider concurrency slots shared by every worker of the backend."""

    def __init__(self) -> None:
        self._wakeups = Wakeups()
        self._background: set[asyncio.Future[None]] = set()

    # ---- atomic primitives (the backends) ------------------------------------------------------------
    @abstractmethod
    async def try_take(self, limits: ProviderLimits, lease_id: str) -> int:
        """0 = lease taken; otherwise a hint in ms until the earliest held lease expires. Raises
        ProviderPaused (nothing taken) while the provider is paused, checked in the same atomic step."""

    @abstractmethod
    async def peek(self, limits: ProviderLimits) -> int:
        """0 = a slot is free right now (nothing is taken); otherwise ms until the earliest lease expires."""

    @abstractmethod
    async def refresh(self, limits: ProviderLimits, lease_id: str) -> bool:
        """Renew a held lease for a whole TTL; False if it had already expired (it is gone)."""

    @abstractmethod
    def give_back(self, limits: ProviderLimits, lease_id: str) -> Awaitable[None]:
        """May be a plain function returning the awaitable: the Redis store puts its ZREM on the wire before
        the caller first awaits, so a cancelled caller still gives the slot back."""

    # ---- taking, waiting and giving back -------------------------------------------------------------
    async def try_lease(self, limits: ProviderLimits) -> Lease | None:
        """Take a per-provider concurrency slot if one is free right now, else None. Never waits.
        ProviderPaused while the provider is paused.

        A lease returned here heartbeats until ``release_lease(limits, lease)`` (always call it)."""
        lease = Lease(limits.name, uuid.uuid4().hex)
        try:
            hint_ms = await self.try_take(limits, lease.lease_id)
        except asyncio.CancelledError:
            self._release_in_background(limits, lease.lease_id)
            raise
        if hint_ms != 0:
            return None
        self._start_heartbeat(limits, lease)
        return lease

    def new_lease(self, limits: ProviderLimits) -> Lease:
        """A lease not yet taken, for an ask that takes it with the bucket grant (store.admit)."""
        return Lease(limits.name, uuid.uuid4().hex)

    def hold(self, limits: ProviderLimits, lease: Lease) -> None:
        """Start the heartbeat of a lease the buckets' ADMIT took (until ``release_lease``)."""
        self._start_heartbeat(limits, lease)

    def forget(self, limits: ProviderLimits, lease: Lease) -> None:
        """Give back, in the background, a lease an ask may have taken before it was cancelled (the
        give-back of an id never taken is harmless)."""
        self._release_in_background(limits, lease.lease_id)

    async def release_lease(self, limits: ProviderLimits, lease: Lease) -> None:
        """Give back a lease from try_lease(); wakes the next waiter of this provider in this process."""
        lease.stop_heartbeat()
        try:
            await self.give_back(limits, lease.lease_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # the TTL returns the slot; don't mask the caller's own exception
            log.exception("could not release lease %s of provider %s", lease.lease_id, limits.name)
        finally:
            self._wakeups.notify_one("lease:" + limits.name)

    async def wait_for_lease(self, limits: ProviderLimits) -> None:
        """Wait until a concurrency slot of this provider looks free. Takes nothing.

        Woken at once (FIFO) by a release in this process; slots freed by other processes are noticed
        by polling (2 ms doubling to 100 ms, or sooner if the earliest lease expires sooner)."""
        key = "lease:" + limits.name
        step, delay = 0, LEASE_POLL_MIN_S
        while True:
            hint_ms = await self.peek(limits)
            if hint_ms == 0:
                return
            timeout = min(delay, max(hint_ms / 1000.0, LEASE_POLL_MIN_S))
            await self._wakeups.wait(key, timeout * random.uniform(1.0, 1.5))
            step += 1
            delay = capped_exponential(LEASE_POLL_MIN_S, LEASE_POLL_MAX_S, step)

    @asynccontextmanager
    async def lease(self, limits: ProviderLimits) -> AsyncIterator[Lease]:
        """A per-provider concurrency slot shared by every worker. Take it AFTER the bucket grant.

        Waits for a free slot (woken at once by releases in this process, polling with backoff for
        other processes), heartbeats while held, releases on exit, also on cancellation.
        """
        lease = Lease(limits.name, uuid.uuid4().hex)
        key = "lease:" + limits.name
        step, delay = 0, LEASE_POLL_MIN_S
        while True:
            try:
                hint_ms = await self.try_take(limits, lease.lease_id)
            except asyncio.CancelledError:
                # the store may have granted the slot before we were cancelled: give it back now
                # rather than after the TTL (ZREM of an absent id is harmless)
                self._release_in_background(limits, lease.lease_id)
                raise
            if hint_ms == 0:
                break
            timeout = min(delay, max(hint_ms / 1000.0, LEASE_POLL_MIN_S))
            await self._wakeups.wait(key, timeout * random.uniform(1.0, 1.5))
            step += 1
            delay = capped_exponential(LEASE_POLL_MIN_S, LEASE_POLL_MAX_S, step)
        self._start_heartbeat(limits, lease)
        try:
            yield lease
        finally:
            await self.release_lease(limits, lease)

    @property
    def background_releases(self) -> int:
        """Gives-back of a cancelled taker still under way (they finish on their own)."""
        return len(self._background)

    def _release_in_background(self, limits: ProviderLimits, lease_id: str) -> None:
        task = asyncio.ensure_future(self.give_back(limits, lease_id))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # nothing to report: TTL backs it
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- heartbeats ----------------------------------------------------------------------------------
    def _start_heartbeat(self, limits: ProviderLimits, lease: Lease) -> None:
        loop = asyncio.get_running_loop()
        interval = max(0.05, limits.lease_ttl_seconds / 3.0)

        def start() -> None:
            lease.keep_heartbeat("task", loop.create_task(self._heartbeat(limits, lease, interval)))

        lease.keep_heartbeat("timer", loop.call_later(interval, start))

    async def _heartbeat(self, limits: ProviderLimits, lease: Lease, interval: float) -> None:
        while True:
            try:
                if not await self.refresh(limits, lease.lease_id):
                    lease.lost = True
                    log.warning(
                        "lease %s of provider %s expired before its heartbeat", lease.lease_id, limits.name
                    )
                    return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("lease heartbeat failed for provider %s", limits.name)
            await asyncio.sleep(interval)

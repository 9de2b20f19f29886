"""Behaviour shared by both quota stores: the waiting loops, leases with heartbeats, the global cap.

A store implements a handful of atomic primitives (try_acquire, _reconcile_delta, _release, penalize,
clear_pause, _lease_try, _lease_peek, _lease_refresh, _lease_release, snapshot, config_version and the
budget ledger's _budget_*). Everything that waits lives here, so the Redis store and the in-process
store behave identically by construction. What the engine calls on a store is
``gateway_engine.protocols.QuotaStore``.

No I/O but the store's own: this is the hot path of the async execution engine.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeAlias

from .types import (
    BudgetExceeded,
    BudgetReservation,
    Decision,
    ProviderLimits,
    ProviderQuotaState,
    QuotaImpossible,
    Reservation,
    TeamLimits,
)

log = logging.getLogger(__name__)

# Lease waiting: poll the shared store with exponential backoff (cross-process), and get woken at once
# when a lease is released inside this process.
LEASE_POLL_MIN_S = 0.002
LEASE_POLL_MAX_S = 0.1
CLUSTER_LEASE_NAME = "*cluster*"  # not a valid provider slug, so it never collides


def log_pause(provider: str, retry_after_seconds: float) -> None:
    """The event for a Retry-After pause of a provider's bucket (every worker waits it out)."""
    log.warning(
        "provider %s paused for %.1f s (Retry-After)",
        provider,
        retry_after_seconds,
        extra={"event": "provider_paused", "provider": provider, "seconds": float(retry_after_seconds)},
    )


def jitter_seconds(wait_ms: int) -> float:
    """A little randomness so waiters woken by the same refill don't all hit the store in the same ms."""
    return random.uniform(0.0, 0.001 + wait_ms * 0.00002)


# seed(team, period ("day" | "month"), key suffix) -> tokens already used in that period
BudgetSeed = Callable[[str, str, str], int]
# the callers of one provider waiting for its buckets in one event loop, FIFO (see acquire)
_AcquireQueue: TypeAlias = "collections.deque[asyncio.Future[None]]"


class Wakeups:
    """FIFO wake-ups keyed by name, safe across threads and event loops (one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, dict[asyncio.Future[None], None]] = {}

    async def wait(self, key: str, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            self._waiters.setdefault(key, {})[fut] = None
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
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


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass
class Lease:
    provider: str
    lease_id: str
    lost: bool = False  # set if a heartbeat found the lease gone (holder stalled longer than the TTL)
    # "timer" (until the first heartbeat) and "task" (the heartbeat loop), cancelled on release
    _heartbeat: dict[str, asyncio.TimerHandle | asyncio.Task[None]] = field(
        default_factory=dict, repr=False, compare=False
    )


# the default per-process in-flight cap (the gateway passes its own: providers.limits.build_quota_store)
DEFAULT_GLOBAL_MAX_IN_FLIGHT = 64


@dataclass
class GlobalSlot:
    """One in-flight slot of this process (and the cluster lease, if a cluster cap is set)."""

    cluster_lease: Lease | None = None
    released: bool = False


class BaseQuotaStore:
    """The public API. Subclasses provide the atomic primitives."""

    backend = "base"

    def __init__(
        self, global_max_in_flight: int | None = None, cluster_max_in_flight: int | None = None
    ) -> None:
        if global_max_in_flight is None:
            global_max_in_flight = DEFAULT_GLOBAL_MAX_IN_FLIGHT
        if cluster_max_in_flight is None:
            cluster_max_in_flight = 0
        self.global_max_in_flight = int(global_max_in_flight)
        # Cluster-wide cap (0 = off): a lease on a reserved name that no provider slug can take.
        self.cluster_max_in_flight = int(cluster_max_in_flight)
        self._cluster_limits = (
            ProviderLimits(
                CLUSTER_LEASE_NAME,
                rpm=1,
                tpm=1,
                burst_seconds=1,
                max_concurrency=self.cluster_max_in_flight,
                timeout_seconds=50,
            )
            if self.cluster_max_in_flight > 0
            else None
        )
        self._wakeups = Wakeups()
        self._global_lock = threading.Lock()
        self._global_in_flight = 0
        self._background: set[asyncio.Future[None]] = set()
        self._acquire_queues: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, _AcquireQueue]
        ] = weakref.WeakKeyDictionary()

    # ---- primitives (subclasses) ---------------------------------------------------------------------
    async def try_acquire(self, limits: ProviderLimits, tokens: int = 0) -> Decision:
        """One atomic attempt: take 1 RPM token and `tokens` TPM tokens, or nothing. Never waits."""
        raise NotImplementedError

    async def _reconcile_delta(self, limits: ProviderLimits, delta_tokens: int) -> None:
        raise NotImplementedError

    async def _release(self, limits: ProviderLimits, tokens: int) -> None:
        """Atomically give back 1 RPM token and `tokens` TPM tokens, each clamped to its capacity."""
        raise NotImplementedError

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        """Pause every worker for this provider for retry_after_seconds (never shortens a pause).
        Returns paused_until in the store's ms clock."""
        raise NotImplementedError

    async def clear_pause(self, limits: ProviderLimits) -> None:
        """End a 429 pause (penalize) now, for every worker; tokens and leases are untouched.
        For operators (admin action "Clear rate-limit pause")."""
        raise NotImplementedError

    async def _lease_try(self, limits: ProviderLimits, lease_id: str) -> int:
        """0 = lease taken; otherwise a hint in ms until the earliest held lease expires."""
        raise NotImplementedError

    async def _lease_peek(self, limits: ProviderLimits) -> int:
        """0 = a slot is free right now (nothing is taken); otherwise ms until the earliest lease expires."""
        raise NotImplementedError

    async def _lease_refresh(self, limits: ProviderLimits, lease_id: str) -> bool:
        raise NotImplementedError

    def _lease_release(self, limits: ProviderLimits, lease_id: str) -> Awaitable[None]:
        """May be a plain function returning the awaitable: the Redis store puts its ZREM on the wire before
        the caller first awaits, so a cancelled caller still gives the slot back."""
        raise NotImplementedError

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        raise NotImplementedError

    async def config_version(self) -> int:
        """The shared provider-config version: whoever changes providers, routes or teams bumps it (the
        gateway: providers.live_config); a limits source reloads when it moved."""
        raise NotImplementedError

    def _budget_key(self, team: str, suffix: str) -> str:
        raise NotImplementedError

    async def _budget_try(self, keys: list[str], tokens: int, limits: list[int]) -> tuple[int, int, int]:
        """Atomically: (0, 0, 0) every key += tokens; (2, i, 0) key i missing; (1, i, used) no room."""
        raise NotImplementedError

    async def _budget_adjust(self, keys: list[str], delta: int) -> None:
        """Every existing key += delta (not below 0); missing keys stay missing."""
        raise NotImplementedError

    async def _budget_get(self, keys: list[str]) -> list[int | None]:
        raise NotImplementedError

    async def _budget_seed(self, key: str, used: int, ttl_seconds: int) -> None:
        """Set the key to `used` unless it exists (another worker seeded it first)."""
        raise NotImplementedError

    async def _budget_delete(self, keys: list[str]) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release resources bound to the running event loop (call at the end of an asyncio.run)."""

    # ---- buckets -----------------------------------------------------------------------------------
    @staticmethod
    def _check_tokens(limits: ProviderLimits, tokens: int) -> int:
        tokens = int(tokens)
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        if tokens > limits.tpm_capacity:
            raise QuotaImpossible(limits.name, tokens, limits.tpm_capacity)
        return tokens

    async def acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        *,
        max_wait_seconds: float | None = None,
        current: Callable[[], ProviderLimits] | None = None,
    ) -> Reservation:
        """Wait until BOTH buckets grant (1 request, `tokens` tokens), then return the reservation.

        Sleeps exactly the wait the store computed (plus a little jitter); never busy-polls.
        Raises QuotaImpossible at once if `tokens` can never fit, QuotaStoreUnavailable if the shared
        store is down, TimeoutError if max_wait_seconds is given and the next wait would exceed it.
        ``current()``, if given, returns the live limits: a waiter asks with them on every retry, so a
        limit changed while it waits applies to it at once (not the rates it started waiting with).
        """
        tokens = self._check_tokens(limits, tokens)
        loop = asyncio.get_running_loop()
        deadline = None if max_wait_seconds is None else loop.time() + max_wait_seconds
        # While nobody waits, callers go straight to the store (concurrently, pipelined). Once a caller
        # is told to wait, callers of that provider in this event loop line up (FIFO) and only the head
        # asks the store: N waiters cost one store call per grant instead of N, and a large request is
        # not overtaken by smaller ones that arrived after it (in this process; across processes the
        # shared buckets decide).
        decision: Decision | None = None
        if not self._waiting(loop, limits.name):
            asked = await self._ask(limits, tokens)
            if isinstance(asked, Reservation):
                return asked
            decision = asked
        queue = self._acquire_queue(loop, limits.name)
        me: asyncio.Future[None] = loop.create_future()
        queue.append(me)
        try:
            if queue[0] is not me:
                await self._wait_turn(me, deadline, limits.name, max_wait_seconds)
                decision = None  # our turn: ask at once
            return await self._head_acquire(limits, tokens, decision, deadline, current)
        finally:
            self._leave_queue(loop, limits.name, queue, me)

    async def _ask(self, limits: ProviderLimits, tokens: int) -> Reservation | Decision:
        """One try at the buckets: the reservation if granted, else the decision (how long to wait)."""
        decision = await self.try_acquire(limits, tokens)
        if decision.granted:
            return Reservation(limits.name, tokens)
        if decision.impossible:
            raise QuotaImpossible(limits.name, tokens, limits.tpm_capacity)
        return decision

    @staticmethod
    async def _wait_turn(
        me: asyncio.Future[None], deadline: float | None, name: str, max_wait_seconds: float | None
    ) -> None:
        """Wait until we are the head of the provider's queue (TimeoutError past the deadline)."""
        if deadline is None:
            await me
            return
        try:
            await asyncio.wait_for(me, max(0.0, deadline - asyncio.get_running_loop().time()))
        except TimeoutError:
            raise TimeoutError(
                f"provider {name}: still queued for quota after {max_wait_seconds} s"
            ) from None

    async def _head_acquire(
        self,
        limits: ProviderLimits,
        tokens: int,
        decision: Decision | None,
        deadline: float | None,
        current: Callable[[], ProviderLimits] | None,
    ) -> Reservation:
        """As the head of the queue: ask (with the live limits), sleep the wait the store computed, ask
        again, until granted. ``decision``: an answer already in hand (None: ask at once)."""
        loop = asyncio.get_running_loop()
        while True:
            if decision is None:
                if current is not None:
                    limits = current()
                    tokens = self._check_tokens(limits, tokens)
                asked = await self._ask(limits, tokens)
                if isinstance(asked, Reservation):
                    return asked
                decision = asked
            delay = decision.wait_ms / 1000.0 + jitter_seconds(decision.wait_ms)
            if deadline is not None and loop.time() + delay > deadline:
                raise TimeoutError(
                    f"provider {limits.name}: quota wait of {decision.wait_ms} ms exceeds max_wait_seconds"
                )
            await asyncio.sleep(delay)
            decision = None

    def _leave_queue(
        self, loop: asyncio.AbstractEventLoop, name: str, queue: _AcquireQueue, me: asyncio.Future[None]
    ) -> None:
        was_head = queue[0] is me
        queue.remove(me)
        if was_head and queue and not queue[0].done():
            queue[0].set_result(None)  # a cancelled next head wakes its successor itself
        queues = self._acquire_queues.get(loop)
        if not queue and queues is not None and queues.get(name) is queue:
            del queues[name]

    def _waiting(self, loop: asyncio.AbstractEventLoop, name: str) -> _AcquireQueue | None:
        """The provider's queue of waiters in this loop, if there is one (may be empty)."""
        queues = self._acquire_queues.get(loop)
        return None if queues is None else queues.get(name)

    def _acquire_queue(self, loop: asyncio.AbstractEventLoop, name: str) -> _AcquireQueue:
        """The provider's queue of waiters in this loop, created if needed."""
        queues = self._acquire_queues.get(loop)
        if queues is None:
            with self._global_lock:
                queues = self._acquire_queues.setdefault(loop, {})
        queue = queues.get(name)
        if queue is None:
            queue = queues[name] = collections.deque()
        return queue

    async def reconcile(self, limits: ProviderLimits, reservation: Reservation, actual_tokens: int) -> None:
        """Settle a reservation with the provider's reported usage: refund the unused part, or take the
        overage as debt (the TPM bucket may go negative, delaying the next callers). The debt is
        clamped to one bucket's capacity: an absurd ``usage`` (10^12 tokens) delays the provider by
        at most one bucket refill, never for good."""
        if reservation.current is not None:
            limits = reservation.current()
        delta = min(int(actual_tokens) - int(reservation.tokens), int(limits.tpm_capacity))
        if delta:
            await self._reconcile_delta(limits, delta)
        if reservation.budget is not None:
            await self.settle_budget(reservation.budget, actual_tokens)

    # ---- team token budgets (the ledger) --------------------------------------------------------------
    async def reserve_budget(
        self, team: TeamLimits, tokens: int, seed: BudgetSeed | None = None, *, now_s: float | None = None
    ) -> BudgetReservation:
        """Reserve `tokens` against the team's UTC day and month ledgers, atomically: both or neither.

        Raises BudgetExceeded (nothing taken) if a period with a budget has no room. A ledger key
        that is missing (first use of the period, or Redis lost it) is seeded with
        ``seed(team, period, key_suffix)`` (sync, run in a thread; the Django side reads the database)
        and the reservation is tried again. Periods without a budget are counted too, so a budget
        set later starts from the right number (the engine only calls this for teams with a budget; the
        ledger of a team whose budgets are removed is dropped, see forget_budget)."""
        tokens = max(0, int(tokens))
        periods = team.budgets(time.time() if now_s is None else now_s)
        keys = [self._budget_key(team.name, suffix) for _, suffix, _, _ in periods]
        caps = [-1 if limit is None else int(limit) for _, _, limit, _ in periods]
        for _ in range(len(keys) + 2):
            status, index, used = await self._budget_try(keys, tokens, caps)
            if status == 0:
                return BudgetReservation(team.name, tuple(keys), tokens)
            period, suffix, limit, ttl = periods[index]
            if status == 1:
                raise BudgetExceeded(team.name, period, caps[index], int(used), tokens)
            await self._budget_seed(keys[index], await self._seed_value(team, period, suffix, seed), ttl)
        raise RuntimeError(f"team {team.name}: budget ledger keys keep disappearing")

    async def budget_usage(
        self, team: TeamLimits, seed: BudgetSeed | None = None, *, now_s: float | None = None
    ) -> list[tuple[str, int | None, int]]:
        """[(period, limit or None, used)] for the UTC day and month (seeding missing ledgers)."""
        periods = team.budgets(time.time() if now_s is None else now_s)
        keys = [self._budget_key(team.name, suffix) for _, suffix, _, _ in periods]
        values = await self._budget_get(keys)
        out = []
        for key, value, (period, suffix, limit, ttl) in zip(keys, values, periods, strict=True):
            if value is None:
                await self._budget_seed(key, await self._seed_value(team, period, suffix, seed), ttl)
                value = (await self._budget_get([key]))[0] or 0
            out.append((period, limit, int(value)))
        return out

    async def forget_budget(self, team: TeamLimits, *, now_s: float | None = None) -> None:
        """Drop the team's ledger for today and this month (its budgets were removed: the ledger stops
        counting, and must be re-seeded from the database if a budget is set again)."""
        periods = team.budgets(time.time() if now_s is None else now_s)
        await self._budget_delete([self._budget_key(team.name, suffix) for _, suffix, _, _ in periods])

    @staticmethod
    async def _seed_value(team: TeamLimits, period: str, suffix: str, seed: BudgetSeed | None) -> int:
        if seed is None:
            return 0
        return max(0, int(await asyncio.to_thread(seed, team.name, period, suffix)))

    async def settle_budget(self, budget: BudgetReservation, actual_tokens: int) -> None:
        """Replace the reserved estimate by the provider's reported usage (refund or add). Once."""
        if budget.settled:
            return
        budget.settled = True
        delta = int(actual_tokens) - budget.tokens
        if delta:
            await self._budget_adjust(list(budget.keys), delta)

    async def give_back_budget(self, budget: BudgetReservation) -> None:
        """Nothing was used (not sent, or no usage reported): the reservation is refunded. Once."""
        await self.settle_budget(budget, 0)

    async def release(self, limits: ProviderLimits, reservation: Reservation) -> None:
        """Give an unused grant back: 1 request and the reserved tokens, atomically, clamped to capacity.

        For a caller that got its bucket grant but cannot send right away (no concurrency slot free):
        it must not sit on the token while it waits, or the tokens granted meanwhile go out later
        all at once and the provider sees more than the bucket allows in a window."""
        if reservation.current is not None:
            limits = reservation.current()
        await self._release(limits, int(reservation.tokens))

    # ---- concurrency leases -------------------------------------------------------------------------
    async def try_lease(self, limits: ProviderLimits) -> Lease | None:
        """Take a per-provider concurrency slot if one is free right now, else None. Never waits.

        A lease returned here heartbeats until ``release_lease(limits, lease)`` (always call it)."""
        lease = Lease(limits.name, uuid.uuid4().hex)
        try:
            hint_ms = await self._lease_try(limits, lease.lease_id)
        except asyncio.CancelledError:
            self._release_in_background(limits, lease.lease_id)
            raise
        if hint_ms != 0:
            return None
        self._start_heartbeat(limits, lease)
        return lease

    async def release_lease(self, limits: ProviderLimits, lease: Lease) -> None:
        """Give back a lease from try_lease(); wakes the next waiter of this provider in this process."""
        self._stop_heartbeat(lease)
        try:
            await self._lease_release(limits, lease.lease_id)
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
        delay = LEASE_POLL_MIN_S
        while True:
            hint_ms = await self._lease_peek(limits)
            if hint_ms == 0:
                return
            timeout = min(delay, max(hint_ms / 1000.0, LEASE_POLL_MIN_S))
            await self._wakeups.wait(key, timeout * random.uniform(1.0, 1.5))
            delay = min(delay * 2, LEASE_POLL_MAX_S)

    def _start_heartbeat(self, limits: ProviderLimits, lease: Lease) -> None:
        loop = asyncio.get_running_loop()
        interval = max(0.05, limits.lease_ttl_seconds / 3.0)
        state = lease._heartbeat

        def start() -> None:
            state["task"] = loop.create_task(self._heartbeat(limits, lease, interval))

        state["timer"] = loop.call_later(interval, start)

    @staticmethod
    def _stop_heartbeat(lease: Lease) -> None:
        state = lease._heartbeat
        timer = state.pop("timer", None)
        if timer is not None:
            timer.cancel()
        task = state.pop("task", None)
        if task is not None:
            task.cancel()

    @asynccontextmanager
    async def lease(self, limits: ProviderLimits) -> AsyncIterator[Lease]:
        """A per-provider concurrency slot shared by every worker. Take it AFTER the bucket grant.

        Waits for a free slot (woken at once by releases in this process, polling with backoff for
        other processes), heartbeats while held, releases on exit, also on cancellation.
        """
        lease = Lease(limits.name, uuid.uuid4().hex)
        key = "lease:" + limits.name
        delay = LEASE_POLL_MIN_S
        while True:
            try:
                hint_ms = await self._lease_try(limits, lease.lease_id)
            except asyncio.CancelledError:
                # the store may have granted the slot before we were cancelled: give it back now
                # rather than after the TTL (ZREM of an absent id is harmless)
                self._release_in_background(limits, lease.lease_id)
                raise
            if hint_ms == 0:
                break
            timeout = min(delay, max(hint_ms / 1000.0, LEASE_POLL_MIN_S))
            await self._wakeups.wait(key, timeout * random.uniform(1.0, 1.5))
            delay = min(delay * 2, LEASE_POLL_MAX_S)
        self._start_heartbeat(limits, lease)
        try:
            yield lease
        finally:
            await self.release_lease(limits, lease)

    def _release_in_background(self, limits: ProviderLimits, lease_id: str) -> None:
        task = asyncio.ensure_future(self._lease_release(limits, lease_id))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # nothing to report: TTL backs it
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _heartbeat(self, limits: ProviderLimits, lease: Lease, interval: float) -> None:
        while True:
            try:
                if not await self._lease_refresh(limits, lease.lease_id):
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

    # ---- global in-flight cap (per worker process) --------------------------------------------------------
    @asynccontextmanager
    async def global_slot(self) -> AsyncIterator[None]:
        """One of ``global_max_in_flight`` slots for this whole process (all threads and event loops),
        and, if ``cluster_max_in_flight`` > 0, one of that many slots across every worker (a lease in
        the shared store). Waits for both. (The engine takes them without waiting: try_global_slot.)"""
        delay = LEASE_POLL_MIN_S
        while True:
            with self._global_lock:
                if self._global_in_flight < self.global_max_in_flight:
                    self._global_in_flight += 1
                    break
            await self._wakeups.wait("global", delay)
            delay = min(delay * 2, LEASE_POLL_MAX_S)
        try:
            if self._cluster_limits is None:
                yield
            else:
                async with self.lease(self._cluster_limits):
                    yield
        finally:
            with self._global_lock:
                self._global_in_flight -= 1
            self._wakeups.notify_one("global")

    async def try_global_slot(self) -> GlobalSlot | None:
        """Take an in-flight slot (and the cluster lease, if a cluster cap is set) if one is free right
        now, else None. Never waits. Give it back with ``release_global_slot``."""
        with self._global_lock:
            if self._global_in_flight >= self.global_max_in_flight:
                return None
            self._global_in_flight += 1
        slot = GlobalSlot()
        if self._cluster_limits is None:
            return slot
        try:
            slot.cluster_lease = await self.try_lease(self._cluster_limits)
        except BaseException:
            self._give_back_global()
            raise
        if slot.cluster_lease is None:
            self._give_back_global()
            return None
        return slot

    async def release_global_slot(self, slot: GlobalSlot) -> None:
        if slot.released:
            return
        slot.released = True
        try:
            if slot.cluster_lease is not None:
                assert self._cluster_limits is not None  # a cluster lease is only taken under a cluster cap
                await self.release_lease(self._cluster_limits, slot.cluster_lease)
        finally:
            self._give_back_global()

    async def wait_for_global_slot(self) -> None:
        """Wait until an in-flight slot looks free (woken at once by a release in this process). Takes nothing."""
        delay = LEASE_POLL_MIN_S
        while True:
            with self._global_lock:
                free = self._global_in_flight < self.global_max_in_flight
            if free:
                break
            await self._wakeups.wait("global", delay)
            delay = min(delay * 2, LEASE_POLL_MAX_S)
        if self._cluster_limits is not None:
            await self.wait_for_lease(self._cluster_limits)

    def _give_back_global(self) -> None:
        with self._global_lock:
            self._global_in_flight -= 1
        self._wakeups.notify_one("global")

    @property
    def global_in_flight(self) -> int:
        return self._global_in_flight

    async def snapshot_many(self, limits_list: list[ProviderLimits]) -> list[ProviderQuotaState]:
        return [await self.snapshot(limits) for limits in limits_list]

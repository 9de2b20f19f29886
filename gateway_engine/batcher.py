"""The cross-provider async batcher: route → quota pool → scheduler → provider, with failure isolation.

No ORM in here. Input: work items and a RoutingTable (plain dataclasses); output: one ItemResult per
item, in input order. Per attempt, in this order:

    1. breaker permit for the chosen provider (open → next candidate, or wait for the half-open probe)
    2. bucket token:   store.acquire(limits, estimated tokens)   — waits only on THIS provider's bucket,
                                                                   holding nothing else
    3. (long items)    the long-item lane (at most 3/4 of the in-flight slots)   — taken without waiting
    4. provider lease: store.try_lease(limits)                   — cross-worker concurrency slot, no wait
    5. in-flight slot: store.try_global_slot()                   — per-process cap, no wait
       No idle token holders: if 3, 4 or 5 is busy, everything taken so far goes back, the bucket
       token included (store.release: 1 request + the reserved tokens), the item waits until that
       one looks free (woken at once by a release in this process, short polling across processes)
       and starts again at 2. A send therefore follows its grant at once, and the provider never
       sees more than capacity + rate × window (see _Run.admit).
    6. send (one hard deadline = provider timeout_seconds), release the lease, reconcile usage
    7. retry/fallback decision; the final attempt's in-flight slot is held until ``on_result`` returned
       (the caller persists the result there), so "sent but not recorded" never exceeds the cap.

Every retry goes through 1–6 again. Items are dispatched per preferred provider (one small worker pool
per provider), shortest first, so an empty bucket at provider A never delays provider B, and short
items are not stuck behind long ones.

Input is a list (``batch()`` / ``abatch(list)``) or an async item source (``ItemFeed``: the gateway's
dispatcher feeds claimed items in fair order while the run goes on; items are served FIFO per provider).
An item with a ``deadline`` that passes before it is sent — waiting for quota, a breaker or a backoff —
ends ``expired`` (attempts already made stay recorded). ``RunControl`` lets the caller cancel one batch
or drain the run (items not sent yet come back ``released``, to be queued again); waiting items wake at
once on either.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, ParamSpec, TypeAlias, TypeVar

from .breaker import BreakerUnavailable, LocalBreaker
from .http import HttpClients, HttpOutcome, TransportFactory
from .items import AttemptEntry, ItemResult, RawItem, WorkItem, estimate_tokens
from .journal import NULL_JOURNAL
from .observer import NULL_OBSERVER, EngineObserver
from .options import EngineOptions
from .protocols import (
    AsyncCloseable,
    AttemptJournal,
    Breaker,
    ItemSource,
    LimitsProvider,
    QuotaStore,
    ResultSink,
)
from .quota.types import (
    BudgetExceeded,
    ProviderLimits,
    QuotaImpossible,
    QuotaStoreUnavailable,
    Reservation,
    TeamLimits,
)
from .retry import ErrorType, is_retryable_error, rate_limit_wait
from .routing import (
    ProviderConfig,
    RoutingError,
    RoutingTable,
    candidates,
    routing_table_from_config,
    stable_draw,
)
from .stats import build_stats

log = logging.getLogger(__name__)

BREAKER_FAILURES = (
    ErrorType.SERVER_ERROR,
    ErrorType.TIMEOUT,
    ErrorType.CONNECTION_ERROR,
    ErrorType.INVALID_RESPONSE,
)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


Stack: TypeAlias = "AsyncExitStack[bool | None]"
# (reservation, held, slot): held = gate + long lane + provider lease (closed after the send),
# slot = the in-flight slot (closed once the result is stored)
Admitted: TypeAlias = "tuple[Reservation, Stack, Stack]"
Finished: TypeAlias = "tuple[ItemResult, Stack | None]"  # an item's result and its in-flight slot
Blocked: TypeAlias = Literal["", "lane", "lease", "slot"]  # what was busy when taking slots ("": nothing)
_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass
class _ItemState:
    """One item's way through its attempts (``_Run.run_item``): where it may go and what it has done."""

    item: WorkItem
    result: ItemResult
    key: str  # the X-Request-ID header and the weighted draw's identity
    cands: list[ProviderConfig]
    est: int  # estimated tokens (the bucket reservation)
    per_provider: dict[str, int] = field(default_factory=dict)  # attempts per provider
    impossible: set[str] = field(default_factory=set)  # providers whose bucket can never fit the item
    last_provider: str = ""
    delay: float = 0.0  # backoff / Retry-After before retrying last_provider
    breaker_waited: float = 0.0  # seconds spent waiting for open breakers (measured)

    def usable(self, p: ProviderConfig) -> bool:
        return p.name not in self.impossible and self.per_provider.get(p.name, 0) <= p.max_retries

    def remaining(self) -> list[ProviderConfig]:
        return [p for p in self.cands if self.usable(p)]


class _Run:
    """State of one abatch() call, bound to its event loop."""

    def __init__(
        self,
        batcher: CrossProviderBatcher,
        should_cancel: Callable[[], bool] | None,
        control: RunControl | None = None,
    ):
        self.b = batcher
        self.http = HttpClients(
            batcher.transport_factory,
            transport=batcher.options.transport,
            max_answer_bytes=batcher.options.max_answer_bytes,
        )
        self.should_cancel = should_cancel or (lambda: False)
        self.control = control
        self.wake = asyncio.Event()  # replaced by a fresh one each time it is set (see poke)
        self.outage_logged = -1e9
        if control is not None:
            control.bind(asyncio.get_running_loop(), self.poke)
        slots = max(1, int(batcher.store.global_max_in_flight))
        self.long_lane = asyncio.Semaphore(max(1, int(slots * batcher.options.long_lane_share)))
        self.rng = random.Random(batcher.options.seed)
        self._gates: dict[tuple[str, int], asyncio.Semaphore] = {}

    def gate(self, limits: ProviderLimits) -> asyncio.Semaphore:
        """At most max_concurrency items of this run between "asking the bucket" and "answer in" per
        provider: this run can never hold more leases than that, so the others wait here, locally,
        instead of taking a bucket token, failing to get a lease and giving the token back (three
        store round trips for nothing). No token is held while waiting here."""
        key = (limits.name, max(1, int(limits.max_concurrency)))
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(key[1])
        return gate

    async def limits(self, config: ProviderConfig) -> ProviderLimits:
        source = self.b.limits_source
        if source is None:
            return config.limits
        try:
            return await source.get(config.name)
        except LookupError:  # provider deleted mid-run: keep the limits the run started with
            return config.limits

    async def team_limits(self, team: str) -> TeamLimits | None:
        """The item's team's live limits (budgets, share cap); None without a team or limits source."""
        source = self.b.limits_source
        if not team or source is None:
            return None
        return await source.team(team)

    def live_limits(self, limits: ProviderLimits, team: str) -> Callable[[], ProviderLimits]:
        """The provider's current cached limits with the team's current share cap (for waiters that
        re-ask the bucket, and for settling: a change applies to items already waiting)."""
        source = self.b.limits_source
        if source is None:
            return lambda: limits

        def current() -> ProviderLimits:
            team_limits = source.peek_team(team) if team else None
            share = team_limits.max_provider_share if team_limits is not None else None
            return source.peek(limits.name, limits).for_team(team, share)

        return current

    async def admit(
        self, limits: ProviderLimits, est: int, *, check_cancel: bool, team: str = ""
    ) -> Admitted | None:
        """Team budget, then bucket token, then — without waiting — long lane, provider lease and
        in-flight slot.

        The item's estimated tokens are first reserved against its team's day and month budgets
        (BudgetExceeded if there is no room: the item is not retried); the reservation rides on the
        returned Reservation, ``store.reconcile`` settles it to the provider's usage, and closing
        ``slot`` refunds it if nothing was settled (not sent, or no usage reported). A team with a
        share cap takes a token of its per-(provider, team) bucket together with the provider's.

        If any of lane, lease or slot is busy, everything is given back, the bucket token too
        (``store.release``), and we wait until that one looks free, then start again at the bucket. So
        nobody sits on a token they cannot use at once, and a send follows its grant immediately: the
        provider never sees more than the bucket allows (capacity + rate × window). Returns
        (reservation, held, slot): ``held`` (lane + lease) is closed after the send, ``slot``
        (in-flight) after the result is stored. None when the batch was cancelled (and check_cancel is
        set) before anything was sent.
        """
        store = self.b.store
        team_limits = await self.team_limits(team)
        budget = None
        if team_limits is not None:
            limits = limits.for_team(team_limits.name, team_limits.max_provider_share)
            if team_limits.has_budget:
                seed = self.b.limits_source.budget_seed if self.b.limits_source is not None else None
                budget = await store.reserve_budget(team_limits, est, seed)  # BudgetExceeded: not sent
        try:
            admitted = await self._admit_provider(limits, est, check_cancel, team)
        except BaseException:
            if budget is not None:
                await store.give_back_budget(budget)
            raise
        if admitted is None or budget is None:
            if admitted is None and budget is not None:
                await store.give_back_budget(budget)
            return admitted
        reservation, held, slot = admitted
        slot.push_async_callback(store.give_back_budget, budget)  # no-op once reconcile settled it
        return replace(reservation, budget=budget), held, slot

    async def _admit_provider(
        self, limits: ProviderLimits, est: int, check_cancel: bool, team: str
    ) -> Admitted | None:
        """Bucket token, lane, lease, in-flight slot (see admit)."""
        store, long_item = self.b.store, est > self.b.options.long_item_tokens
        live = self.live_limits(limits, team)
        gate = self.gate(limits)
        while True:
            reservation = await self._bucket_token(gate, live, est)
            limits = live()
            if check_cancel and self.should_cancel():
                gate.release()
                await store.release(limits, reservation)
                return None
            blocked, held, slot = await self._take_slots(gate, limits, long_item)
            if not blocked:
                return replace(reservation, current=live), held, slot
            await held.aclose()
            await store.release(limits, reservation)  # no idle token holders
            await self._wait_until_free(blocked, limits)
            if check_cancel and self.should_cancel():
                return None

    async def _bucket_token(
        self, gate: asyncio.Semaphore, live: Callable[[], ProviderLimits], est: int
    ) -> Reservation:
        """Pass this run's gate for the provider, then wait for the bucket's grant (gate held after)."""
        limits = live()
        await gate.acquire()
        try:
            return await self.b.store.acquire(limits, est, current=live)
        except BaseException:
            gate.release()
            raise

    async def _take_slots(
        self, gate: asyncio.Semaphore, limits: ProviderLimits, long_item: bool
    ) -> tuple[Blocked, Stack, Stack]:
        """Without waiting: the long lane (long items only), the provider lease, the in-flight slot.
        Returns what was busy ("" when everything was taken), ``held`` (gate, lane, lease) and ``slot``
        (in-flight). On an exception everything taken is given back."""
        held, slot = AsyncExitStack(), AsyncExitStack()
        held.callback(gate.release)
        try:
            blocked = await self._try_slots(held, slot, limits, long_item)
        except BaseException:
            await slot.aclose()
            await held.aclose()
            raise
        return blocked, held, slot

    async def _try_slots(self, held: Stack, slot: Stack, limits: ProviderLimits, long_item: bool) -> Blocked:
        store = self.b.store
        if long_item:
            if self.long_lane.locked():
                return "lane"
            await self.long_lane.acquire()  # free: returns without yielding
            held.callback(self.long_lane.release)
        lease = await store.try_lease(limits)
        if lease is None:
            return "lease"
        held.push_async_callback(store.release_lease, limits, lease)
        global_slot = await store.try_global_slot()
        if global_slot is None:
            return "slot"
        slot.push_async_callback(store.release_global_slot, global_slot)
        return ""

    async def _wait_until_free(self, blocked: Blocked, limits: ProviderLimits) -> None:
        """Wait (holding nothing) until what was busy looks free."""
        if blocked == "lane":
            await self.long_lane.acquire()  # FIFO; hand it straight on, we start over at the bucket
            self.long_lane.release()
        elif blocked == "lease":
            await self.b.store.wait_for_lease(limits)
        else:
            await self.b.store.wait_for_global_slot()

    async def ride(
        self, what: str, fn: Callable[_P, Awaitable[_T]], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """One quota-store/breaker call; while the store is unreachable, wait with backoff (0.2 s
        doubling to 2 s by default, logged loudly) for at most ``store_outage_seconds``, then raise."""
        opts = self.b.options
        give_up, delay = None, opts.store_retry_min_seconds
        while True:
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                if not _is_store_failure(exc):
                    raise
                now = time.monotonic()
                give_up = give_up or now + opts.store_outage_seconds
                if now + delay > give_up:
                    raise
                if now - self.outage_logged >= 1.0:
                    self.outage_logged = now
                    log.error("%s: quota store unavailable (%s); items paused, retrying", what, exc)
                await asyncio.sleep(delay)
                delay = min(opts.store_retry_max_seconds, delay * 2)

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

    async def sleep(self, seconds: float, item: WorkItem, result: ItemResult) -> None:
        """Sleep, waking early only when the item has to stop (deadline, cancel, drain)."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            finished, _ = await self.bounded(asyncio.sleep(left), item)
            if not finished and self.stop_reason(item, result):
                return

    async def admit_bounded(
        self, limits: ProviderLimits, est: int, item: WorkItem, result: ItemResult
    ) -> Admitted | None:
        """``admit`` that gives up (None, nothing held) when the item has to stop while waiting."""
        while True:
            finished, admitted = await self.bounded(
                self.admit(limits, est, check_cancel=not result.attempts, team=item.team), item
            )
            if finished:
                return admitted
            if admitted is not None:  # granted just as we gave up: give everything back
                reservation, held, slot = admitted
                await held.aclose()
                await slot.aclose()
                await self.b.store.release(limits, reservation)
            if self.stop_reason(item, result):
                return None

    def end(self, result: ItemResult, reason: str) -> tuple[ItemResult, None]:
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
        return result, None

    # ---- one item: attempts until it succeeds, fails for good or has to stop --------------------------

    async def run_item(self, item: WorkItem) -> Finished:
        """Attempts (breaker → quota → send → decide) until the item has its final result. Returns the
        result and its in-flight slot (None if nothing was sent), which the caller closes once the
        result is stored."""
        state = self._item_state(item)
        if isinstance(state, ItemResult):
            return state, None
        while True:
            done = await self._step(state)
            if done is not None:
                return done

    def _item_state(self, item: WorkItem) -> _ItemState | ItemResult:
        """The item's candidates in order (its failed result ``no_provider`` when it cannot be routed)."""
        b = self.b
        result = ItemResult(item.custom_id, "failed")
        key = item.key or item.custom_id
        try:
            cands = candidates(
                b.table,
                route=item.route,
                provider=item.provider,
                draw=stable_draw(item.batch_id or b.salt, key),
            )
        except RoutingError as exc:
            result.error_type, result.error_message = ErrorType.NO_PROVIDER, str(exc)
            return result
        est = estimate_tokens(item.messages, item.params, b.options.default_max_tokens)
        return _ItemState(item, result, key, cands, est)

    async def _step(self, state: _ItemState) -> Finished | None:
        """One pass: stop? backoff? breaker permit, then one attempt. None: go round again."""
        item, result = state.item, state.result
        reason = self.stop_reason(item, result)
        if reason:
            return self.end(result, reason)
        remaining = state.remaining()
        if not remaining:
            return result, None  # the last failure is already recorded on the result
        if state.delay > 0 and remaining[0].name == state.last_provider:
            # backoff / Retry-After before retrying the same provider (ends early on the deadline)
            await self.sleep(state.delay, item, result)
            state.delay = 0.0
            return None
        state.delay = 0.0
        choice, probe, wait = await self._permit(remaining)
        if choice is None:
            return await self._wait_for_breaker(state, remaining, wait)
        return await self._attempt(state, choice, probe)

    async def _permit(
        self, remaining: list[ProviderConfig]
    ) -> tuple[ProviderConfig | None, bool, float | None]:
        """The first candidate whose breaker lets a call through, and whether that call is the half-open
        probe. None if every breaker is open, with the shortest wait any of them named."""
        wait: float | None = None
        for p in remaining:
            permit = await self.ride(
                "breaker",
                self.b.breaker.allow,
                p.name,
                probe_ttl_seconds=p.timeout_seconds + self.b.options.breaker_probe_grace_seconds,
            )
            if permit.allowed:
                return p, permit.probe, None
            wait = permit.wait_seconds if wait is None else min(wait, permit.wait_seconds)
        return None, False, wait

    async def _wait_for_breaker(
        self, state: _ItemState, remaining: list[ProviderConfig], wait: float | None
    ) -> Finished | None:
        """Every candidate's breaker is open: wait for the first probe, or give up once the item has
        waited ``max_breaker_wait_seconds`` in all."""
        opts = self.b.options
        if state.breaker_waited >= opts.max_breaker_wait_seconds:
            _breaker_gave_up(state.result, remaining, state.breaker_waited, opts.max_breaker_wait_seconds)
            return state.result, None
        wait = max(0.05, wait or 0.0) + self.rng.uniform(0, 0.05)
        slept_from = time.monotonic()
        await self.sleep(
            min(wait, opts.max_breaker_wait_seconds - state.breaker_waited), state.item, state.result
        )
        state.breaker_waited += time.monotonic() - slept_from
        return None

    async def _attempt(self, state: _ItemState, choice: ProviderConfig, probe: bool) -> Finished | None:
        """Quota for ``choice``, then the send, then what the answer means for the item."""
        item, result = state.item, state.result
        limits = await self.ride("limits", self.limits, choice)
        # noted durably before it can leave (before the quota wait, so no Redis round trip sits between
        # the bucket's grant and the send); it counts once the HTTP layer marks it sent (journal.sent)
        attempt = result.attempts + 1
        await self.ride("journal", self.b.journal.before_send, item, choice.name, attempt, state.est)
        waited_from = time.monotonic()
        try:
            admitted = await self.ride("quota", self.admit_bounded, limits, state.est, item, result)
        except BudgetExceeded as exc:  # the team's budget is used up: not retried, nothing was sent
            result.error_type, result.error_message = ErrorType.BUDGET_EXCEEDED, str(exc)
            result.error_status_code = None
            return result, None
        except QuotaImpossible as exc:
            state.impossible.add(choice.name)
            if not result.attempts or result.error_type == ErrorType.QUOTA_IMPOSSIBLE:
                result.error_type, result.error_message = ErrorType.QUOTA_IMPOSSIBLE, str(exc)
                result.error_status_code = None
            return None
        if admitted is None:  # stopped before the send (nothing held, token given back)
            return self.end(result, self.stop_reason(item, result) or "cancelled")
        reservation, held, slot = admitted
        self.b.observer.on_quota_wait(choice.name, time.monotonic() - waited_from)
        outcome, started = await self._send(state, choice, held, slot)
        return await self._after_send(state, choice, probe, limits, reservation, outcome, started, slot)

    async def _send(
        self, state: _ItemState, choice: ProviderConfig, held: Stack, slot: Stack
    ) -> tuple[HttpOutcome, str]:
        """The HTTP call, holding the long lane and the provider lease (released as soon as the answer is
        in). Returns the outcome and when it was sent."""
        sent: HttpOutcome | None = None
        started = ""
        try:
            async with held:  # long lane + provider lease: released as soon as the answer is in
                started = _now_iso()
                item, attempt, journal = state.item, state.result.attempts + 1, self.b.journal
                sent = await self.http.get(choice).chat(
                    item.messages,
                    item.params,
                    request_id=state.key,
                    on_sent=lambda: journal.sent(item, attempt),
                )
        except BaseException as exc:
            if sent is None or not _is_store_failure(exc):
                await slot.aclose()
                raise
            # the answer is in; only the lease release failed (store down): it expires by itself
            log.warning("%s: lease not released (quota store unavailable); it expires", choice.name)
        assert sent is not None  # the call returned (an exception without an answer was re-raised)
        return sent, started

    async def _after_send(
        self,
        state: _ItemState,
        choice: ProviderConfig,
        probe: bool,
        limits: ProviderLimits,
        reservation: Reservation,
        outcome: HttpOutcome,
        started: str,
        slot: Stack,
    ) -> Finished | None:
        """Record the attempt; on success or a final failure return the result with its in-flight slot,
        else give the slot back and set the delay before the next attempt (None: go round again)."""
        try:
            entry = await self._record_attempt(state, choice, limits, reservation, outcome, started)
            if outcome.ok:
                await self._succeeded(state.result, choice, entry, outcome)
                return state.result, slot
            retry_after = await self._failed(state.result, choice, probe, limits, entry, outcome)
            if not is_retryable_error(outcome.error_type, outcome.status_code):
                return state.result, slot
            if not state.remaining():
                return state.result, slot
        except BaseException:
            await slot.aclose()  # never leak the process-wide in-flight slot
            raise
        await slot.aclose()
        self.b.observer.on_retry(choice.name, outcome.error_type)
        if retry_after is not None:
            state.delay = retry_after
        else:
            state.delay = self.b.options.retry.backoff(state.per_provider[choice.name] - 1, self.rng)
        return None

    async def _record_attempt(
        self,
        state: _ItemState,
        choice: ProviderConfig,
        limits: ProviderLimits,
        reservation: Reservation,
        outcome: HttpOutcome,
        started: str,
    ) -> AttemptEntry:
        """Count the attempt, settle the bucket with the reported usage, log it on the result and tell
        the observer."""
        item, result = state.item, state.result
        state.per_provider[choice.name] = state.per_provider.get(choice.name, 0) + 1
        result.attempts += 1
        state.last_provider = choice.name
        usage = outcome.usage
        if usage is not None:
            await self.ride("reconcile", self.b.store.reconcile, limits, reservation, usage["total_tokens"])
        entry = _attempt_entry(choice.name, outcome, started)
        result.attempt_log.append(entry)
        self.b.observer.on_attempt(choice.name, error_type=outcome.error_type or "", status_code=outcome.status_code, latency_s=outcome.latency_ms / 1000.0, prompt_tokens=entry["prompt_tokens"], completion_tokens=entry["completion_tokens"], used=outcome.ok, custom_id=item.custom_id, attempt=result.attempts, team=item.team, batch_id=item.batch_id)  # fmt: skip
        result.provider, result.latency_ms = choice.name, outcome.latency_ms
        return entry

    async def _succeeded(
        self, result: ItemResult, choice: ProviderConfig, entry: AttemptEntry, outcome: HttpOutcome
    ) -> None:
        await self.ride("breaker", self.b.breaker.record, choice.name, ok=True)
        entry["used"] = True
        result.status, result.response = "succeeded", outcome.body
        result.error_type, result.error_status_code, result.error_message = "", None, ""
        usage = outcome.usage
        if usage is not None:
            result.prompt_tokens = usage["prompt_tokens"]
            result.completion_tokens = usage["completion_tokens"]
            result.total_tokens = usage["total_tokens"]

    async def _failed(
        self,
        result: ItemResult,
        choice: ProviderConfig,
        probe: bool,
        limits: ProviderLimits,
        entry: AttemptEntry,
        outcome: HttpOutcome,
    ) -> float | None:
        """Record a failed attempt on the result, tell the breaker and (a 429) the bucket. Returns the
        wait the answer asked for (Retry-After / x-ratelimit-reset-*), if believable."""
        b = self.b
        result.retry_extra_tokens += entry["tokens"]
        result.error_type = outcome.error_type
        result.error_status_code = outcome.status_code
        result.error_message = outcome.message
        retry_after = (
            rate_limit_wait(outcome.headers, ceiling=b.options.retry.max_rate_limit_wait_seconds)
            if outcome.status_code
            else None
        )
        if outcome.error_type in BREAKER_FAILURES:
            await self.ride(
                "breaker", b.breaker.record, choice.name, ok=False, retry_after_seconds=retry_after
            )
        elif probe:  # the provider answered (429 or a 4xx): it is alive
            await self.ride("breaker", b.breaker.record, choice.name, ok=True)
        if outcome.status_code == 429 and retry_after:
            await self.ride("penalize", b.store.penalize, limits, retry_after)
        return retry_after


def _attempt_entry(provider: str, outcome: HttpOutcome, started: str) -> AttemptEntry:
    """The attempt log entry of one HTTP attempt (see gateway_engine.stats)."""
    usage = outcome.usage
    entry: AttemptEntry = {
        "provider": provider,
        "status_code": outcome.status_code,
        "error_type": outcome.error_type,
        "latency_ms": outcome.latency_ms,
        "prompt_tokens": usage["prompt_tokens"] if usage else 0,
        "completion_tokens": usage["completion_tokens"] if usage else 0,
        "tokens": usage["total_tokens"] if usage else 0,
        "used": False,
        "at": started,
    }
    if outcome.detail:  # staff only (admin/dashboard); teams see the sanitised message
        entry["detail"] = outcome.detail
    return entry


class _Queues:
    """One abatch() call's items, per preferred provider, and the workers that serve them."""

    def __init__(self, batcher: CrossProviderBatcher, run: _Run, on_result: ResultSink | None) -> None:
        self.b, self.run, self.on_result = batcher, run, on_result
        self.work: list[WorkItem] = []
        self.results: list[ItemResult | None] = []
        self.queues: dict[str, deque[int]] = {}
        self.alive: dict[str, int] = {}

    def preferred(self, item: WorkItem) -> str:
        try:
            return candidates(
                self.b.table,
                route=item.route,
                provider=item.provider,
                draw=stable_draw(item.batch_id or self.b.salt, item.key or item.custom_id),
            )[0].name
        except RoutingError:
            return ""

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
        default = self.b.options.default_max_tokens
        for name, queue in self.queues.items():
            est = {i: estimate_tokens(self.work[i].messages, self.work[i].params, default) for i in queue}
            self.queues[name] = deque(sorted(queue, key=lambda i: (est[i], i)))

    def staff(self, tg: asyncio.TaskGroup, name: str) -> None:
        """Start workers for ``name``'s queue, up to the provider's worker count."""
        for _ in range(min(len(self.queues[name]), self.b._provider_workers(name) - self.alive.get(name, 0))):
            self.alive[name] = self.alive.get(name, 0) + 1  # at creation: items added before it runs see it
            tg.create_task(self.worker(name))

    async def worker(self, name: str) -> None:
        queue = self.queues[name]  # counted in ``alive`` by staff() when created
        try:
            while queue:
                index = queue.popleft()
                result, slot = await self.b._run_one(self.run, self.work[index])
                await self.finish(index, result, slot)
        finally:
            self.alive[name] -= 1

    async def finish(self, index: int, result: ItemResult, slot: Stack | None) -> None:
        self.results[index] = result
        self.b.observer.on_item_done(result, team=self.work[index].team, batch_id=self.work[index].batch_id)
        try:
            if self.on_result is not None:
                await self.on_result(index, result)
        finally:
            if slot is not None:
                await slot.aclose()

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


def _breaker_gave_up(result: ItemResult, open_for: list[ProviderConfig], waited: float, limit: float) -> None:
    """End an item that waited ``waited`` seconds (measured) for an open breaker. Sent before: it keeps
    its last attempt's error type and status; never sent: ``no_provider``. The message says which
    breakers were open and how long the item really waited."""
    names = ", ".join(p.name for p in open_for)
    gave_up = f"circuit breaker open for {names}: waited {waited:.1f} s (limit {limit:g} s)"
    if result.attempts:
        result.error_message = f"{result.error_message}; not retried: {gave_up}"
    else:
        result.error_type, result.error_status_code = ErrorType.NO_PROVIDER, None
        result.error_message = f"never sent: {gave_up}" + (
            f"; {result.error_message}" if result.error_message else ""
        )


class RunControl:
    """Thread-safe handle on a running ``abatch``: cancel one batch's unsent items, drain the run
    (items not sent yet end ``released``) or stop it (``stop``: items waiting to retry are released
    too). Waiting items wake at once."""

    def __init__(self) -> None:
        self.cancelled_batches: set[str] = set()
        self.draining = False
        self.stopping = False
        self._lock = threading.Lock()
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

    def _wake(self) -> None:
        with self._lock:
            loop, poke = self._loop, self._poke
        if loop is not None and poke is not None:
            try:
                loop.call_soon_threadsafe(poke)
            except RuntimeError:  # the loop is closed: nothing waits any more
                pass


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


class CrossProviderBatcher:
    """Runnable-style batch executor over many providers.

    ``batch(items)`` / ``await abatch(items)`` → list of ItemResult in input order. Items are WorkItems
    or contract ITEM dicts. Usable from plain Python::

        batcher = CrossProviderBatcher.from_config({"providers": [...], "routes": [...]},
                                                   global_max_in_flight=32)
        results = batcher.batch([{"custom_id": "1", "route": "intent", "query": "hi"}])

    What it talks to is typed in ``gateway_engine.protocols``: a ``QuotaStore`` (default: a fresh
    ``LocalQuotaStore``), a ``Breaker`` (default: a ``LocalBreaker``), an optional ``LimitsProvider``
    (live limits; without one the routing table's limits apply) and an ``EngineObserver``. The
    gateway's Celery side (``batches.execution.build_batcher``) passes the shared store, breaker and
    LimitsSource and builds ``options`` from its settings.
    """

    def __init__(
        self,
        table: RoutingTable,
        *,
        store: QuotaStore | None = None,
        breaker: Breaker | None = None,
        limits_source: LimitsProvider | None = None,
        options: EngineOptions | None = None,
        global_max_in_flight: int = 64,
        salt: str = "",
        transport_factory: TransportFactory | None = None,
        observer: EngineObserver | None = None,
        journal: AttemptJournal | None = None,
    ):
        if store is None:
            from .quota.local import LocalQuotaStore

            store = LocalQuotaStore(global_max_in_flight=global_max_in_flight)
        self.table = table
        self.store: QuotaStore = store
        self.breaker: Breaker = breaker if breaker is not None else LocalBreaker()
        self.limits_source = limits_source
        self.options = options or EngineOptions()
        self.salt = salt
        self.transport_factory = transport_factory
        self.observer: EngineObserver = observer or NULL_OBSERVER
        self.journal: AttemptJournal = journal or NULL_JOURNAL
        self.last_stats: dict[str, Any] | None = None

    @classmethod
    def from_config(cls, data: Mapping[str, Any], **kwargs: Any) -> CrossProviderBatcher:
        """From the provider file's shape (docs/contract.md §3): {"providers": [...], "routes": [...]}."""
        return cls(routing_table_from_config(data), **kwargs)

    def _provider_workers(self, name: str) -> int:
        config = self.table.providers.get(name)
        concurrency = config.max_concurrency if config else 1
        return max(self.options.provider_workers_min, self.options.provider_workers_factor * concurrency)

    async def abatch(
        self,
        items: Iterable[RawItem] | ItemSource,
        *,
        on_result: ResultSink | None = None,
        should_cancel: Callable[[], bool] | None = None,
        batch_id: str = "",
        control: RunControl | None = None,
    ) -> list[ItemResult]:
        """Run every item; results in input order (for an async source: in arrival order).

        A list is grouped per preferred provider and served shortest first; an async source (e.g.
        ``ItemFeed``) is served FIFO per provider as items arrive, until the source ends."""
        run = _Run(self, should_cancel, control)
        started = time.monotonic()
        self.observer.on_run_start(batch_id, len(items) if isinstance(items, list) else 0)
        queues = _Queues(self, run, on_result)
        try:
            async with asyncio.TaskGroup() as tg:
                await queues.serve(tg, items)
        except BaseExceptionGroup as group:
            raise _first_leaf(group) from None
        finally:
            self.observer.on_run_end(batch_id)
            await run.http.aclose()
        final = queues.final()
        elapsed_ms = int((time.monotonic() - started) * 1000)
        self.last_stats = build_stats(batch_id, final, len(queues.work), elapsed_ms)
        return final

    async def _run_one(self, run: _Run, item: WorkItem) -> Finished:
        try:
            return await run.run_item(item)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            if _is_store_failure(exc):
                raise
            log.exception("engine bug while running item %s", item.custom_id)
            result = ItemResult(
                item.custom_id,
                "failed",
                error_type=ErrorType.GATEWAY_ERROR,
                error_message=f"{type(exc).__name__}: {exc}",
            )
            return result, None

    def batch(self, items: Iterable[RawItem], **kwargs: Any) -> list[ItemResult]:
        """Synchronous wrapper (own event loop); closes loop-bound store/breaker clients afterwards."""

        async def main() -> list[ItemResult]:
            try:
                return await self.abatch(items, **kwargs)
            finally:
                await _aclose_quietly(self.store)
                await _aclose_quietly(self.breaker)

        return asyncio.run(main())


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception of a (nested) exception group: what a TaskGroup's caller re-raises."""
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _is_store_failure(exc: BaseException) -> bool:
    return isinstance(exc, (QuotaStoreUnavailable, BreakerUnavailable))


async def _aclose_quietly(obj: AsyncCloseable) -> None:
    try:
        await obj.aclose()
    except Exception:  # noqa: BLE001 - closing a pool at the end of a run must not mask results
        log.warning("could not close %r", obj, exc_info=True)

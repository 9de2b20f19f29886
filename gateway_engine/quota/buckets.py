"""RPM/TPM (and ITPM/OTPM) token buckets with the per-(provider, team) share bucket and the provider
pause: the abstract base and its waiting.

A backend implements the atomic primitives (``try_acquire``, ``reconcile_delta``, ``give_back``,
``penalize``, ``clear_pause``, ``set_pause``, ``drop_pause``, ``provider_pause``, ``snapshot``): the
Redis Lua scripts (redis_buckets.py) and the in-process store (local_buckets.py). Everything that
waits for a grant lives here, so both backends behave identically by construction; what a grant asks
of each bucket, and what a settle moves, is token_ask.py.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .acquire_queue import AcquireQueues
from .bucket_backend import BucketBackend
from .fair_gate import TeamShareWait
from .following import RemainingFollower
from .pauses import ProviderPauses
from .priority import InteractiveMarks
from .team_quota import TeamQuota
from .token_ask import AskHold, TokenAsk, settle_deltas, team_delta
from .types import (
    Decision,
    Lane,
    LeaseBusy,
    ProviderLimits,
    ProviderQuotaState,
    QuotaImpossible,
    Reservation,
    SettleOutcome,
)
from .wakeups import Wakeups

log = logging.getLogger(__name__)


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


def granted_team(reservation: Reservation) -> TeamQuota | None:
    """The team's buckets a grant took from, at their live limits (Reservation.current_team): a bucket
    the grant did not take from (no share cap, no rpm / tpm limit then) is left out of its settle and its
    give-back, and a team gone meanwhile keeps the limits it was granted with."""
    taken = reservation.team
    if taken is None:
        return None
    live = (reservation.current_team() if reservation.current_team is not None else None) or taken
    return replace(
        live,
        share=live.share if taken.share_capped else None,
        rpm=live.rpm if taken.rpm is not None else None,
        tpm=live.tpm if taken.tpm is not None else None,
    )


@dataclass(frozen=True)
class _Live:
    """A waiter's source of the live provider limits and team quota (each None: keep what it asked with)."""

    current: Callable[[], ProviderLimits] | None
    team: TeamQuota | None
    current_team: Callable[[], TeamQuota | None] | None

    def now(self, limits: ProviderLimits) -> tuple[ProviderLimits, TeamQuota | None]:
        live = limits if self.current is None else self.current()
        return live, self.team if self.current_team is None else self.current_team()


class TokenBuckets(BucketBackend, ProviderPauses, RemainingFollower, ABC):
    """A provider's RPM, TPM (and ITPM / OTPM, where set) buckets shared by every caller of the backend
    (and the team share)."""

    def __init__(self) -> None:
        self.queues = AcquireQueues()
        self.marks = InteractiveMarks(self.mark_interactive, self.unmark_interactive)
        # the head waiter of each provider sleeps here, so a pause set or lifted in this process wakes it
        self._sleepers = Wakeups()

    async def snapshot_many(self, limits_list: list[ProviderLimits]) -> list[ProviderQuotaState]:
        return [await self.snapshot(limits) for limits in limits_list]

    # ---- waiting for a grant -------------------------------------------------------------------------
    async def acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        *,
        max_wait_seconds: float | None = None,
        current: Callable[[], ProviderLimits] | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        lane: Lane = "batch",
        step_aside: bool = False,
        team: TeamQuota | None = None,
        current_team: Callable[[], TeamQuota | None] | None = None,
        lease_id: str | None = None,
        hold: AskHold | None = None,
    ) -> Reservation:
        """Wait until every bucket grants (1 request, `tokens` tokens; `input_tokens` / `output_tokens`
        of the ITPM / OTPM buckets where set: see TokenAsk), then return the reservation.

        Sleeps exactly the wait the store computed (the longest over the buckets, plus a little
        jitter); never busy-polls. Raises QuotaImpossible at once if a bucket can never hold its
        amount, ProviderPaused while the provider is paused (a waiter of this process is woken when a
        pause is set here, others see it on their next try), QuotaStoreUnavailable if the shared store
        is down, TimeoutError if max_wait_seconds is given and the next wait would exceed it.
        ``current()``, if given, returns the live limits: a waiter asks with them on every retry, so a
        limit changed while it waits applies to it at once (not the rates it started waiting with).
        ``lane``: batch asks yield to interactive callers waiting for the provider; an interactive
        caller that has to wait holds its process's mark on the provider meanwhile (priority.py), and
        lines up only with other interactive callers. ``step_aside``: raise TeamShareWait instead of
        waiting when only the team's buckets are short (the interactive fair queue, fair_gate.py).
        ``team``: the team's buckets taken with the provider's (team_quota.py); ``current_team()`` its
        live value on every retry, like ``current``. ``lease_id`` (store.admit): every ask also takes
        the provider's concurrency lease under that id in the same atomic step; when the buckets would
        grant but every lease is held, nothing is taken and LeaseBusy is raised (the caller waits for a
        lease holding nothing, then asks again). ``hold``: taken just before each try, given back
        when the try is refused, kept with the grant (this process's in-flight slot: store.admit).
        """
        ask = TokenAsk(tokens, input_tokens, output_tokens, step_aside, lease_id, hold)
        ask.amounts(limits, team)  # QuotaImpossible before any wait
        mine = _Live(current, team, current_team)
        loop = asyncio.get_running_loop()
        deadline = None if max_wait_seconds is None else loop.time() + max_wait_seconds
        # While nobody waits, callers go straight to the store (concurrently, pipelined). Once a caller
        # is told to wait, callers of that provider in this event loop line up (FIFO, acquire_queue.py)
        # (in this process; across processes the shared buckets decide).
        decision: Decision | None = None
        line = limits.name if lane == "batch" else f"{limits.name}\x00{lane}"
        if not self.queues.waiting(loop, line):
            asked = await self._ask(limits, ask, lane, team)
            if isinstance(asked, Reservation):
                return asked
            decision = asked
        if lane == "interactive":
            async with self.marks.waiting(limits.name):
                return await self._line_up(
                    loop, line, limits, ask, decision, (deadline, max_wait_seconds), mine, lane
                )
        return await self._line_up(
            loop, line, limits, ask, decision, (deadline, max_wait_seconds), mine, lane
        )

    async def _line_up(
        self,
        loop: asyncio.AbstractEventLoop,
        line: str,
        limits: ProviderLimits,
        ask: TokenAsk,
        decision: Decision | None,
        wait: tuple[float | None, float | None],
        live: _Live,
        lane: Lane,
    ) -> Reservation:
        """Join the line of this loop's waiters for the provider; as its head, ask until granted.
        ``wait``: the deadline (loop time) and the max_wait_seconds it came from."""
        deadline, max_wait_seconds = wait
        queue = self.queues.queue(loop, line)
        me: asyncio.Future[None] = loop.create_future()
        queue.append(me)
        try:
            if queue[0] is not me:
                await self._wait_turn(me, deadline, limits.name, max_wait_seconds)
                decision = None  # our turn: ask at once
            return await self._head_acquire(limits, ask, decision, deadline, live, lane)
        finally:
            self.queues.leave(loop, line, queue, me)

    async def _ask(
        self, limits: ProviderLimits, ask: TokenAsk, lane: Lane, team: TeamQuota | None
    ) -> Reservation | Decision:
        """One try at the buckets: the reservation if granted, else the decision (how long to wait)."""
        n, ni, no = ask.amounts(limits, team)
        self.refuse_if_held(limits.name)  # the durable record's pause, even while the store lost it
        decision = await self._try(limits, ask, (n, ni, no), lane, team)
        if decision.lease_wait_ms:
            raise LeaseBusy(limits.name, decision.lease_wait_ms)
        if decision.granted:
            return Reservation(limits.name, n, ni, no, sent_mark=decision.sent_mark, team=team)
        if decision.impossible:  # amounts() checked these limits: only if the backend disagrees
            raise QuotaImpossible(limits.name, n, limits.tpm_capacity)
        if decision.team_wait and ask.step_aside and team is not None:
            raise TeamShareWait(limits.name, team.team, decision.wait_ms / 1000.0)
        return decision

    async def _try(
        self,
        limits: ProviderLimits,
        ask: TokenAsk,
        amounts: tuple[int, int, int],
        lane: Lane,
        team: TeamQuota | None,
    ) -> Decision:
        """One try at the store, with ``ask.hold`` held around it (kept only if granted)."""
        if ask.hold is not None:
            await ask.hold.take()
        try:
            decision = await self.try_acquire(limits, *amounts, lane=lane, team=team, lease_id=ask.lease_id)
        except BaseException:
            if ask.hold is not None:
                ask.hold.give_back()
            raise
        if not decision.granted and ask.hold is not None:
            ask.hold.give_back()
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
        ask: TokenAsk,
        decision: Decision | None,
        deadline: float | None,
        live: _Live,
        lane: Lane = "batch",
    ) -> Reservation:
        """As the head of the queue: ask (with the live limits), sleep the wait the store computed, ask
        again, until granted. ``decision``: an answer already in hand (None: ask at once)."""
        loop = asyncio.get_running_loop()
        while True:
            if decision is None:
                limits, team = live.now(limits)
                asked = await self._ask(limits, ask, lane, team)
                if isinstance(asked, Reservation):
                    return asked
                decision = asked
            delay = decision.wait_ms / 1000.0 + jitter_seconds(decision.wait_ms)
            if deadline is not None and loop.time() + delay > deadline:
                raise TimeoutError(
                    f"provider {limits.name}: quota wait of {decision.wait_ms} ms exceeds max_wait_seconds"
                )
            await self._sleepers.wait(limits.name, delay)  # a pause set meanwhile wakes us (ProviderPaused)
            decision = None

    # ---- settling a grant ----------------------------------------------------------------------------
    async def reconcile(
        self,
        limits: ProviderLimits,
        reservation: Reservation,
        actual_tokens: int,
        *,
        actual_input: int | None = None,
        actual_output: int | None = None,
        also: SettleOutcome | None = None,
    ) -> Any:
        """Settle a reservation with the provider's reported usage, each bucket to its part (TPM to
        ``actual_tokens``, ITPM to ``actual_input``, OTPM to ``actual_output``; a part not reported
        stays as reserved): refund the unused part, or take the overage as debt (a bucket may go
        negative, delaying the next callers), each debt clamped to one bucket (settle_deltas). The
        live limits are used (Reservation.current). (The team budget: the store settles it after.)
        ``also``: a caller's step run in the same atomic script (sent even when nothing else moves);
        returns its answer."""
        if reservation.current is not None:
            limits = reservation.current()
        team = granted_team(reservation)
        deltas = settle_deltas(limits, reservation, actual_tokens, actual_input, actual_output)
        more = team_delta(team, reservation, actual_tokens)
        if also is not None:
            return await self.reconcile_delta(limits, deltas, team, more, also)
        if any(deltas) or more:
            await self.reconcile_delta(limits, deltas, team, more)
        return None

    async def release(self, limits: ProviderLimits, reservation: Reservation) -> None:
        """Give an unused grant back: 1 request and the reserved tokens, atomically, clamped to capacity.

        For a caller that got its bucket grant but cannot send right away (no concurrency slot free):
        it must not sit on the token while it waits, or the tokens granted meanwhile go out later
        all at once and the provider sees more than the bucket allows in a window."""
        if reservation.current is not None:
            limits = reservation.current()
        res = reservation
        team = granted_team(res)
        await self.give_back(limits, (int(res.tokens), int(res.input_tokens), int(res.output_tokens)), team)

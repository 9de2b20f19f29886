"""The dispatcher: time-bounded slices that feed every provider's queued work, in fair order, into one
engine run per worker process.

A slice (``DispatchSlice.run``, one ``batches.dispatch`` Celery task, or the single-process thread):

* keeps, per provider with queued work, a small local buffer of claimed items — about what the
  provider can serve in the next ``GATEWAY_DISPATCH_LOOKAHEAD_SECONDS`` (rate × lookahead, at least
  its max_concurrency) — refilled as items finish. Each refill picks a team by start-time fair queuing
  (weights = ``Team.weight``; state shared in Redis), then that team's batches by effective lane (with
  aging), deadline and submission order, and claims a small quantum (``FOR UPDATE SKIP LOCKED``);
* writes results in bulk as they finish, renews its claims, notices cancels (unsent items of a
  cancelled batch end at once, even while waiting), expires overdue batches' pending items in bulk and
  finalizes batches whose last item it stored;
* after ``GATEWAY_DISPATCH_SLICE_SECONDS`` (or when no work is left) stops claiming, lets the engine
  finish what is in flight or in retry, gets unsent items back (``released``) and gives their claims
  back at once, then ends; the task then makes sure enough dispatchers run while work remains.

So a worker process is never held by items waiting for one provider's quota, every dispatcher serves
every provider, and the number of worker processes does not cap how many batches progress at once.
Database and Redis blips inside a slice are ridden through (``common.ride_through``). Starting batches
and keeping enough dispatchers alive: batches.execution.keepalive.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from batches.models import Batch, BatchItem, BatchStatus
from batches.scheduling import BatchCandidate, buffer_target, order_batches, pick_team, quantum
from batches.scheduling.prefix import PrefixGrouping
from gateway_engine import ItemFeed, ItemResult, RunControl
from gateway_engine.redis_errors import REDIS_ERRORS

from . import shutdown
from .apply import apply_results
from .cache_stage import CacheStage
from .capacity import CapacityMoves
from .chores import Chores
from .claims import (
    cancel_claimable,
    cancelled_with_unsent,
    carry_retry_state,
    claim_queued,
    expire_unsent,
    mark_running,
    overdue_batches,
    release_claims,
)
from .common import log, new_owner, ride_through
from .engine_wiring import build_batcher, load_routing_table, work_item
from .fairclock import fair_clock
from .finalize import finalize_batch_if_done, snapshot_progress
from .journal import fold_released
from .queued import TeamWork, queued_work
from .runner import EngineThread
from .served import as_served

WORK_REFRESH_SECONDS = 0.5
PARKED_PER_BUFFER = 4  # parked items not counted against a provider's buffer: up to this many buffers


# ---- one slice -----------------------------------------------------------------------------------------


@dataclass
class SliceReport:
    claimed: int = 0
    written: int = 0
    dropped: int = 0
    released: int = 0
    finalized: set[str] = field(default_factory=set)


class DispatchSlice:
    def __init__(
        self,
        seconds: float | None = None,
        *,
        owner: str | None = None,
        heartbeat: Callable[[], None] | None = None,
    ):
        self.seconds = float(settings.GATEWAY_DISPATCH_SLICE_SECONDS if seconds is None else seconds)
        self.owner = owner or new_owner()  # this slice's claims only (never the process's)
        self.heartbeat = heartbeat
        self.lookahead = float(settings.GATEWAY_DISPATCH_LOOKAHEAD_SECONDS)
        self.aging = float(settings.GATEWAY_PRIORITY_AGING_SECONDS)
        self.grouping = PrefixGrouping(bool(settings.GATEWAY_PREFIX_GROUPING))
        self.dispatchers = 1 if settings.CELERY_TASK_ALWAYS_EAGER else int(settings.GATEWAY_DISPATCHERS)
        self.report = SliceReport()
        self.rows: list[BatchItem] = []  # engine index → claimed row
        self.queue_of: list[str] = []  # engine index → the provider queue it was claimed from
        self.outstanding: Counter[str] = Counter()
        self.open_in_batch: Counter[str] = Counter()  # batch → its items this slice has not stored yet
        self.work: dict[str, dict[str, TeamWork]] = {}
        self.deadlines: dict[str, float | None] = {}
        self.active: set[str] = set()  # batches with items claimed in this slice
        self.touched: set[str] = set()  # batches with results stored since the last finalize check
        self.cancelled: set[str] = set()
        self.started: set[str] = set()

    # -- the loop --

    def run(self) -> SliceReport:
        if shutdown.requested():  # the worker is stopping: claim nothing (another worker takes over)
            log.info("dispatcher slice skipped: this worker is shutting down")
            return self.report
        with shutdown.running_slice():
            return self._run()

    def _run(self) -> SliceReport:
        table = ride_through("load providers", load_routing_table)
        self.table = table
        self.cache = CacheStage(table, self.owner)  # the response cache and in-flight dedup (docs/cache.md)
        self.moves = CapacityMoves(table)  # routing by capacity: drained providers help held-back peers
        self.clock = fair_clock()
        self.feed, self.control = ItemFeed(), RunControl()
        engine = EngineThread(
            build_batcher(table, owner=self.owner), self.feed, name="dispatcher", control=self.control
        )
        engine.start()
        try:
            abandoned = self._loop(engine)
        except BaseException:
            log.exception("dispatcher slice failed; stopping the engine and releasing its claims")
            self.feed.close()
            self.control.drain()
            engine.cancel.set()
            drain_quietly(engine)
            raise
        finally:
            # unsent claims go back at once (never left to the claim lease)
            self.report.released += ride_through(
                "release claims", lambda: release_claims(self.owner), errors=REDIS_ERRORS
            )
        if abandoned:
            engine.cancel.set()  # its thread is a daemon: the process is exiting
        else:
            engine.join()
        ride_through("finalize", self.housekeeping)
        r = self.report
        log.info(
            "dispatcher slice ended: owner=%s claimed=%d written=%d dropped=%d released=%d",
            self.owner, r.claimed, r.written, r.dropped, r.released,
        )  # fmt: skip
        return self.report

    def _loop(self, engine: EngineThread) -> bool:
        """Claim, store and finalize until the engine's run ends; True when a warm shutdown gave up on
        calls still in flight (their items are released)."""
        now = time.monotonic()
        end_at = now + self.seconds
        chores = Chores(self, renew=now + float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3)
        next_refresh = now
        closing = stopping = False
        stop_by = float("inf")
        while not engine.finished:
            now = time.monotonic()
            if not stopping and shutdown.requested():  # warm shutdown: only calls in flight finish
                closing = stopping = True
                self.feed.close()
                self.control.stop()
                stop_by = now + shutdown.seconds()
            elif stopping and now >= stop_by:
                log.error(
                    "shutdown: %d call(s) still in flight after %.0f s; their items are released "
                    "(the attempt journal counts them) and may be sent again",
                    sum(self.outstanding.values()),
                    shutdown.seconds(),
                )
                return True
            if not closing and now >= end_at:
                closing = True
                self.feed.close()
                self.control.drain()  # unsent items come back "released"
            if not closing:
                if now >= next_refresh:
                    read = functools.partial(queued_work, list(self.table.providers))
                    self.work = ride_through("read queued work", read)
                    next_refresh = now + WORK_REFRESH_SECONDS
                ride_through("claim", self.fill, errors=REDIS_ERRORS)
                if not self.work and not sum(self.outstanding.values()) and not self.cache.waiting:
                    closing = True  # nothing queued, nothing in flight: this slice is done
                    self.feed.close()
            self._store_collected(engine)
            chores.run_due(now)
        return False

    def _store_collected(self, engine: EngineThread) -> None:
        """Store what the engine has finished (waiting at most 50 ms for it); a batch with nothing left
        here is finalized now (others' waits never delay it)."""
        entries = engine.collect(0.05)
        if not entries:
            return
        try:
            ride_through("store results", functools.partial(self.store, entries))
        except BaseException as exc:
            engine.resolve(entries, exc)
            raise
        engine.resolve(entries)
        ride_through("finalize", functools.partial(self.finalize_touched, settled=True))

    # -- claiming --

    def fill(self) -> None:
        """Top up every provider's buffer, a quantum at a time, team by SFQ, batch by lane order; items
        parked by the engine (waiting out a breaker or backoff) count not, up to PARKED_PER_BUFFER. Then
        drained providers with room take waiting items of held-back peers (capacity.py)."""
        parked = Counter(self.queue_of[i] for i in self.control.parked())
        known = list(self.table.providers)
        for provider in list(self.work):
            want = self.room(provider, parked)
            if want <= 0:
                continue  # refill in batches once half the buffer is used: fewer, larger claims

            def claim(order: list[str], size: int, team: str, provider: str = provider) -> list[BatchItem]:
                got = claim_queued(
                    provider, order, size, self.owner, known, self.grouping.prefer(provider, team)
                )
                return self.grouping.order(provider, team, got)  # only within this team's quantum

            claim_loop(self, provider, self.work[provider], want, claim)
            if not self.work[provider]:
                del self.work[provider]
        self.moves.fill(
            self.work, lambda p: self.room(p, parked), functools.partial(claim_loop, self), self.owner
        )

    def room(self, provider: str, parked: Counter[str]) -> int:
        """How many items to claim for ``provider``'s buffer now (0 while more than half of it is busy)."""
        config = self.table.providers.get(provider)
        if config is None:
            target = int(settings.GATEWAY_CHUNK_SIZE)
        else:
            rate = config.limits.rpm / 60.0
            target = buffer_target(rate, config.max_concurrency, self.lookahead, dispatchers=self.dispatchers)
        busy = self.outstanding[provider] - min(parked[provider], PARKED_PER_BUFFER * target)
        return 0 if busy > target // 2 else target - busy

    def hand_over(self, provider: str, rows: list[BatchItem], cands: dict[str, BatchCandidate]) -> None:
        for bid in {str(row.batch_id) for row in rows} - self.started:
            self.started.add(bid)
            mark_running(bid)
        rows = self.cache.divert(rows)  # cache hits stored, identical items wait for their leader
        items = []
        for row in rows:
            bid = str(row.batch_id)
            cand = cands.get(bid)
            deadline = cand.expires_at if cand else None
            self.rows.append(row)
            self.queue_of.append(provider)
            items.append(work_item(row, deadline=deadline, team=cand.team_name if cand else ""))
            self.active.add(bid)
            self.open_in_batch[bid] += 1
        self.outstanding[provider] += len(rows)
        self.report.claimed += len(rows)
        self.feed.put(items)

    # -- results --

    def store(self, entries: list[tuple[int, ItemResult, object]]) -> None:
        """Write finished items (one statement per batch), give released ones back, shrink buffers."""
        by_batch, released, kept = partition(self.rows, entries)
        several = len(by_batch) + bool(released) > 1 or bool(kept)  # one statement is atomic on its own
        with transaction.atomic() if several else contextlib.nullcontext():
            for bid, done in by_batch.items():
                applied = apply_results(bid, as_served(done), self.owner)
                self.report.written += applied.written
                self.report.dropped += applied.dropped
            for bid, pairs in kept.items():  # their attempts stay on the item, which is sent again later
                fold_released(self.owner, bid, pairs)
            carry_retry_state(self.owner, [(self.rows[i], r) for i, r, _ in entries])
            if released:
                self.report.released += release_claims(self.owner, released)
        for index, _, _ in entries:
            self.outstanding[self.queue_of[index]] -= 1
            self.open_in_batch[str(self.rows[index].batch_id)] -= 1
        self.touched.update(by_batch)
        self.cache.after_store([(self.rows[i], r) for i, r, _ in entries])

    # -- periodic --

    def check_cancels(self) -> None:
        if not self.active:
            return
        for bid in Batch.objects.filter(id__in=self.active, status=BatchStatus.CANCELLED).values_list(
            "id", flat=True
        ):
            bid = str(bid)
            if bid not in self.cancelled:
                self.cancelled.add(bid)
                self.control.cancel_batch(bid)

    def housekeeping(self) -> None:
        """Expire overdue batches' pending items in bulk; finalize batches that may be done."""
        self.cache.poll()
        for bid in overdue_batches():
            expire_unsent(bid)
            self.touched.add(bid)
        for bid in cancelled_with_unsent():
            cancel_claimable(bid)
            self.touched.add(bid)
        self.finalize_touched(snapshot=True)

    def finalize_touched(self, snapshot: bool = False, settled: bool = False) -> None:
        """Finalize touched batches (``settled``: only those this slice holds nothing more of)."""
        for bid in list(self.touched):
            if settled and self.open_in_batch[bid] > 0:
                continue
            if snapshot:
                snapshot_progress(bid)
            if finalize_batch_if_done(bid):
                self.report.finalized.add(bid)
                self.active.discard(bid)
            self.touched.discard(bid)


def claim_loop(s: DispatchSlice, provider: str, teams: dict[str, TeamWork], want: int, claim) -> int:
    """Slice ``s`` claims up to ``want`` items into ``provider``'s buffer with ``claim(batch order, size,
    team)``, a quantum at a time, team by SFQ on ``provider``'s clock (batches in lane order); a team with
    nothing claimable leaves ``teams``. Returns how many were handed over (``hand_over``)."""
    rate = s.table.providers[provider].limits.rpm / 60.0 if provider in s.table.providers else float("inf")
    now, handed = time.time(), 0
    while want > 0 and teams:
        if len(teams) == 1:  # nobody to share with: one claim for the whole deficit
            pick_name, size = next(iter(teams)), want
        else:
            pick = pick_team(s.clock.state(provider), {t: w.weight for t, w in teams.items()})
            assert pick is not None
            pick_name, size = pick.team, min(want, quantum(rate))
        team = teams[pick_name]
        got = claim([c.batch_id for c in order_batches(team.batches, now, s.aging)], size, pick_name)
        if not got:
            del teams[pick_name]  # nothing claimable for this team here until the next refresh
            continue
        s.clock.charge(provider, pick_name, len(got), team.weight)
        s.hand_over(provider, got, {c.batch_id: c for c in team.batches})
        want -= len(got)
        handed += len(got)
    return handed


def partition(
    rows: list[BatchItem], entries: list[tuple[int, ItemResult, object]]
) -> tuple[dict[str, list], list[int], dict[str, list]]:
    """Finished items per batch, the ids of released ones, and those released after attempts (parked
    when the slice drained, or a shutdown stopped their retries) per batch."""
    by_batch: dict[str, list] = defaultdict(list)
    released: list[int] = []
    kept: dict[str, list] = defaultdict(list)
    for index, result, _ in entries:
        row = rows[index]
        if result.status == "released":
            released.append(row.id)
            if result.attempts:
                kept[str(row.batch_id)].append((row, result))
        else:
            by_batch[str(row.batch_id)].append((row, result))
    return by_batch, released, kept


def drain_quietly(engine: EngineThread) -> None:
    """After a failure: let the engine end, answering its pending results with the error."""
    error = RuntimeError("dispatcher stopped")
    while not engine.finished:
        engine.resolve(engine.collect(0.2), error)
    engine.thread.join(30)

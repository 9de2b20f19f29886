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
Database and Redis blips inside a slice are ridden through (``common.ride_through``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from batches import signals
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from batches.scheduling import BatchCandidate, buffer_target, order_batches, pick_team, quantum
from gateway_engine import ItemFeed, ItemResult, RunControl
from gateway_engine.redis_errors import REDIS_ERRORS
from gateway_site.forksafe import after_fork

from . import shutdown
from .claims import (
    ACTIVE_BATCH_STATUSES,
    cancel_claimable,
    cancelled_with_unsent,
    claim_queued,
    expire_unsent,
    overdue_batches,
    queue_filter,
    release_claims,
    renew_claims,
)
from .common import log, new_owner, ride_through
from .config import build_batcher, load_routing_table, work_item
from .fairclock import fair_clock, redis_client
from .finalize import FINISHED_STATUSES, finalize_batch_if_done, snapshot_progress
from .journal import RELEASED_AFTER_ATTEMPTS, fold_unapplied
from .results import write_results
from .runner import EngineThread

WORK_REFRESH_SECONDS = 0.5
HOUSEKEEPING_SECONDS = 1.0
CANCEL_POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 2.0
UNROUTED = ""  # queue of items with no routable provider at submission (and of rows stored before)


# ---- what is queued ------------------------------------------------------------------------------------


@dataclass
class TeamWork:
    weight: int
    batches: list[BatchCandidate] = field(default_factory=list)


def queued_work(providers: list[str]) -> dict[str, dict[str, TeamWork]]:
    """provider → team → its batches with pending items queued for that provider (one query: an
    EXISTS per provider on the (batch, queue_provider, status) index)."""
    names = list(dict.fromkeys([*providers, UNROUTED]))
    flags = {
        f"q{i}": Exists(
            BatchItem.objects.filter(
                queue_filter(name, names), batch=OuterRef("pk"), status=ItemStatus.PENDING
            )
        )
        for i, name in enumerate(names)
    }
    rows = (
        Batch.objects.filter(status__in=ACTIVE_BATCH_STATUSES, completed_at__isnull=True)
        .annotate(**flags)
        .values("id", "team_id", "team__name", "team__weight", "priority", "created_at", "expires_at", *flags)
    )
    work: dict[str, dict[str, TeamWork]] = {}
    for row in rows:
        cand = BatchCandidate(
            batch_id=str(row["id"]),
            team=str(row["team_id"]),
            priority=row["priority"],
            created_at=row["created_at"].timestamp(),
            expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
            team_name=row["team__name"],
        )
        for i, name in enumerate(names):
            if row[f"q{i}"]:
                team = work.setdefault(name, {}).setdefault(
                    cand.team, TeamWork(int(row["team__weight"] or 1))
                )
                team.batches.append(cand)
    return work


def work_remains() -> bool:
    """Any pending item in an unfinished batch (what dispatchers exist for)."""
    return BatchItem.objects.filter(
        status=ItemStatus.PENDING, batch__status__in=ACTIVE_BATCH_STATUSES, batch__completed_at__isnull=True
    ).exists()


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
        self.dispatchers = 1 if settings.CELERY_TASK_ALWAYS_EAGER else int(settings.GATEWAY_DISPATCHERS)
        self.report = SliceReport()
        self.rows: list[BatchItem] = []  # engine index → claimed row
        self.queue_of: list[str] = []  # engine index → the provider queue it was claimed from
        self.outstanding: Counter[str] = Counter()
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
        self.clock = fair_clock()
        self.feed, self.control = ItemFeed(), RunControl()
        engine = EngineThread(
            build_batcher("", table, owner=self.owner), self.feed, name="dispatcher", control=self.control
        )
        engine.start()
        now = time.monotonic()
        end_at = now + self.seconds
        next_refresh = next_house = next_cancel = next_beat = now
        next_renew = now + float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3
        closing = stopping = abandoned = False
        stop_by = float("inf")
        try:
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
                    abandoned = True
                    break
                if not closing and now >= end_at:
                    closing = True
                    self.feed.close()
                    self.control.drain()  # unsent items come back "released"
                if not closing:
                    if now >= next_refresh:
                        self.work = ride_through(
                            "read queued work", lambda: queued_work(list(table.providers))
                        )
                        next_refresh = now + WORK_REFRESH_SECONDS
                    ride_through("claim", self.fill, errors=REDIS_ERRORS)
                    if not self.work and not sum(self.outstanding.values()):
                        closing = True  # nothing queued, nothing in flight: this slice is done
                        self.feed.close()
                entries = engine.collect(0.05)
                if entries:
                    try:
                        ride_through("store results", functools.partial(self.store, entries))
                    except BaseException as exc:
                        engine.resolve(entries, exc)
                        raise
                    engine.resolve(entries)
                    if not sum(self.outstanding.values()):  # nothing in flight: finalize without waiting
                        ride_through("finalize", self.finalize_touched)
                if now >= next_renew:
                    ride_through("renew claims", lambda: renew_claims(None, self.owner))
                    next_renew = now + float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3
                if now >= next_cancel:
                    ride_through("check cancels", self.check_cancels)
                    next_cancel = now + CANCEL_POLL_SECONDS
                if now >= next_house:
                    ride_through("housekeeping", self.housekeeping)
                    next_house = now + HOUSEKEEPING_SECONDS
                if self.heartbeat is not None and now >= next_beat:
                    try:
                        self.heartbeat()
                    except Exception:  # noqa: BLE001 - a missed heartbeat only risks an extra dispatcher
                        log.warning("dispatcher heartbeat failed", exc_info=True)
                    next_beat = now + HEARTBEAT_SECONDS
        except BaseException:
            log.exception("dispatcher slice failed; stopping the engine and releasing its claims")
            self.feed.close()
            self.control.drain()
            engine.cancel.set()
            self._drain_quietly(engine)
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

    def _drain_quietly(self, engine: EngineThread) -> None:
        """After a failure: let the engine end, answering its pending results with the error."""
        error = RuntimeError("dispatcher stopped")
        while not engine.finished:
            engine.resolve(engine.collect(0.2), error)
        engine.thread.join(30)

    # -- claiming --

    def fill(self) -> None:
        """Top up every provider's buffer, a quantum at a time, team by SFQ, batch by lane order."""
        now = time.time()
        for provider in list(self.work):
            teams = self.work[provider]
            config = self.table.providers.get(provider)
            if config is None:
                rate, target = float("inf"), int(settings.GATEWAY_CHUNK_SIZE)
            else:
                rate = config.limits.rpm / 60.0
                target = buffer_target(
                    rate, config.max_concurrency, self.lookahead, dispatchers=self.dispatchers
                )
            if self.outstanding[provider] > target // 2:
                continue  # refill in batches once half the buffer is used: fewer, larger claims
            want = target - self.outstanding[provider]
            while want > 0 and teams:
                if len(teams) == 1:  # nobody to share with: one claim for the whole deficit
                    pick_name, size = next(iter(teams)), want
                else:
                    pick = pick_team(self.clock.state(provider), {t: w.weight for t, w in teams.items()})
                    assert pick is not None
                    pick_name, size = pick.team, min(want, quantum(rate))
                team = teams[pick_name]
                order = [c.batch_id for c in order_batches(team.batches, now, self.aging)]
                got = claim_queued(provider, order, size, self.owner, list(self.table.providers))
                if not got:
                    del teams[pick_name]  # nothing claimable for this team here until the next refresh
                    continue
                self.clock.charge(provider, pick_name, len(got), team.weight)
                self.hand_over(provider, got, {c.batch_id: c for c in team.batches})
                want -= len(got)
            if not teams:
                del self.work[provider]

    def hand_over(self, provider: str, rows: list[BatchItem], cands: dict[str, BatchCandidate]) -> None:
        items = []
        for row in rows:
            bid = str(row.batch_id)
            cand = cands.get(bid)
            deadline = cand.expires_at if cand else None
            self.rows.append(row)
            self.queue_of.append(provider)
            items.append(work_item(row, deadline=deadline, team=cand.team_name if cand else ""))
            self.active.add(bid)
            if bid not in self.started:
                self.started.add(bid)
                if Batch.objects.filter(id=bid, status=BatchStatus.QUEUED).update(
                    status=BatchStatus.RUNNING, started_at=timezone.now()
                ):
                    started = Batch.objects.filter(id=bid).only("id", "team_id", "total_count", "priority")
                    signals.batch_started.send(sender=Batch, batch=started.first())
        self.outstanding[provider] += len(rows)
        self.report.claimed += len(rows)
        self.feed.put(items)

    # -- results --

    def store(self, entries: list[tuple[int, ItemResult, object]]) -> None:
        """Write finished items (one statement per batch), give released ones back, shrink buffers."""
        by_batch: dict[str, list] = defaultdict(list)
        released: list[int] = []
        kept: dict[str, list] = defaultdict(list)  # released after attempts (a shutdown stopped retries)
        for index, result, _ in entries:
            row = self.rows[index]
            if result.status == "released":
                released.append(row.id)
                if result.attempts:
                    kept[str(row.batch_id)].append((row, result))
            else:
                by_batch[str(row.batch_id)].append((row, result))
        several = len(by_batch) + bool(released) > 1 or bool(kept)  # one statement is atomic on its own
        with transaction.atomic() if several else contextlib.nullcontext():
            for bid, done in by_batch.items():
                written = write_results(bid, done, self.owner)
                self.report.written += written
                self.report.dropped += len(done) - written
            for bid, pairs in kept.items():  # their attempts stay on the item, which is sent again later
                fold_unapplied(self.owner, bid, pairs, note=RELEASED_AFTER_ATTEMPTS)
            if released:
                self.report.released += release_claims(self.owner, released)
        for index, _, _ in entries:
            self.outstanding[self.queue_of[index]] -= 1
        self.touched.update(by_batch)

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
        for bid in overdue_batches():
            expire_unsent(bid)
            self.touched.add(bid)
        for bid in cancelled_with_unsent():
            cancel_claimable(bid)
            self.touched.add(bid)
        self.finalize_touched(snapshot=True)

    def finalize_touched(self, snapshot: bool = False) -> None:
        for bid in list(self.touched):
            if snapshot:
                snapshot_progress(bid)
            if finalize_batch_if_done(bid):
                self.report.finalized.add(bid)
                self.active.discard(bid)
            self.touched.discard(bid)


# ---- start a batch, keep dispatchers alive -------------------------------------------------------------


def start_batch(batch_id: str) -> bool:
    """Mark a queued batch running (its items are already queued per provider). Returns False when
    there is nothing to run (finished, or no items: then it is finalized here)."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        if batch.completed_at is not None or batch.status in FINISHED_STATUSES:
            return False
        if batch.status == BatchStatus.QUEUED:
            batch.status, batch.started_at = BatchStatus.RUNNING, timezone.now()
            batch.save(update_fields=["status", "started_at"])
            transaction.on_commit(lambda: signals.batch_started.send(sender=Batch, batch=batch))
    if not BatchItem.objects.filter(batch_id=batch_id).exists():
        finalize_batch_if_done(batch_id)
        return False
    return True


def dispatcher_target() -> int:
    return int(settings.GATEWAY_DISPATCHERS)


def _token_ttl() -> float:
    """Lifetime of a token that was sent but whose task has not started yet (it may wait in the broker
    behind running slices)."""
    return float(settings.GATEWAY_DISPATCH_SLICE_SECONDS) * 2 + 30


# A running slice heartbeats every HEARTBEAT_SECONDS; its token lives a few beats longer, so a worker
# killed mid-slice stops counting as a live dispatcher within seconds (not after the queued-token TTL).
RUNNING_TOKEN_TTL_SECONDS = HEARTBEAT_SECONDS * 5


class DispatcherSet:
    """The live dispatchers of the cluster: Redis sorted set ``<prefix>dispatchers`` (token → expiry,
    Redis clock), at most GATEWAY_DISPATCHERS members; a running slice heartbeats its token."""

    def __init__(self, client=None):
        self.client = client or redis_client()
        self.key = f"{settings.GATEWAY_REDIS_PREFIX}dispatchers"

    def _now(self) -> float:
        sec, usec = self.client.time()
        return sec + usec / 1e6

    def live(self) -> int:
        self.client.zremrangebyscore(self.key, "-inf", self._now())
        return int(self.client.zcard(self.key))

    def heartbeat(self, token: str, ttl: float | None = None) -> None:
        self.client.zadd(self.key, {token: self._now() + (_token_ttl() if ttl is None else ttl)})

    def leave(self, token: str) -> None:
        self.client.zrem(self.key, token)

    def ensure(self, send: Callable[[str], None]) -> int:
        """Start dispatchers up to the target; returns how many were started."""
        started = 0
        missing = dispatcher_target() - self.live()
        for _ in range(max(0, missing)):
            token = uuid.uuid4().hex
            self.heartbeat(token)
            try:
                send(token)
            except BaseException:
                self.leave(token)
                raise
            started += 1
        return started


def run_dispatcher_task(token: str, send: Callable[[str], None]) -> SliceReport:
    """Body of the ``batches.dispatch`` task: one slice, then leave the set and, if work remains,
    top the set up again (removing our token first, so a submission racing with our exit is seen)."""
    dispatchers = DispatcherSet()

    def beat() -> None:
        dispatchers.heartbeat(token, RUNNING_TOKEN_TTL_SECONDS)

    ride_through("dispatcher heartbeat", beat, errors=REDIS_ERRORS)
    try:
        report = DispatchSlice(heartbeat=beat).run()
    finally:
        try:
            ride_through("dispatcher leave", lambda: dispatchers.leave(token), errors=REDIS_ERRORS)
            if ride_through("check queued work", work_remains):
                ride_through("re-enqueue dispatchers", lambda: dispatchers.ensure(send), errors=REDIS_ERRORS)
        finally:
            connection.close()
    return report


# ---- single-process mode -------------------------------------------------------------------------------

_local_lock = threading.Lock()
_local_state = {"running": False, "poked": False}


@after_fork
def _forget_local_dispatcher() -> None:
    """A forked child has no dispatcher thread, whatever its parent had."""
    global _local_lock
    _local_lock = threading.Lock()
    _local_state.update(running=False, poked=False)


def run_local_until_idle() -> None:
    """Run slices in this thread until no work is left (single-process mode)."""
    while True:
        try:
            DispatchSlice().run()
        except Exception:
            log.exception("single-process dispatcher slice failed")
            time.sleep(1.0)
        with _local_lock:
            if _local_state["poked"] or work_remains():
                _local_state["poked"] = False
                continue
            _local_state["running"] = False
            return


def ensure_local_dispatcher(*, background: bool) -> None:
    """Single-process mode: one dispatcher serving every batch — a background thread, or (eager tests
    and scripts) this thread until no work is left."""
    with _local_lock:
        if _local_state["running"]:
            _local_state["poked"] = True
            return
        _local_state["running"] = True
        _local_state["poked"] = False
    if background:
        threading.Thread(target=_local_thread, name="gateway-dispatcher").start()
    else:
        try:
            run_local_until_idle()
        finally:
            with _local_lock:
                _local_state["running"] = False


def _local_thread() -> None:
    try:
        run_local_until_idle()
    finally:
        with _local_lock:
            _local_state["running"] = False
        connection.close()

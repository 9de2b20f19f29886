"""Starting a batch and keeping dispatchers alive: how many dispatcher tasks run (``DispatcherSet``,
registered in Redis with a heartbeat), the ``batches.dispatch`` task body that runs one slice and
re-enqueues while work remains, and the single-process mode's dispatcher thread.

The slices themselves are ``batches.execution.dispatcher.DispatchSlice``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from batches import signals
from batches.models import Batch, BatchItem, BatchStatus
from gateway_engine.redis_errors import REDIS_ERRORS
from gateway_site.forksafe import after_fork

from .chores import HEARTBEAT_SECONDS
from .common import log, ride_through
from .dispatcher import DispatchSlice, SliceReport
from .fairclock import redis_client
from .finalize import FINISHED_STATUSES, finalize_batch_if_done
from .queued import work_remains


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

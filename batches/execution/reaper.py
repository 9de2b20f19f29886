"""The reconciler: a background thread of every Celery worker (and of the single-process web app)
that, every lease/3 seconds,

* gives claims of dead workers back (``running`` past its claim lease → ``pending``);
* expires the pending items of overdue batches in bulk and finalizes batches with nothing open
  (e.g. a worker died right after storing the last result);
* makes sure dispatchers run while work is queued — this also covers a POST whose enqueue failed
  (broker down) and a dispatcher task lost with its worker;
* kicks the due-work queues other apps registered (``due.py``: rows with a ``due_at``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef

from batches.models import Batch, BatchItem

from . import due
from .claims import (
    ACTIVE_BATCH_STATUSES,
    cancel_claimable,
    cancelled_with_unsent,
    expire_unsent,
    overdue_batches,
    requeue_expired_claims,
)
from .common import OPEN_ITEM_STATUSES, log
from .finalize import finalize_batch_if_done
from .queued import work_remains


def finished_but_open(limit: int = 100) -> list[str]:
    """Unfinished batches none of whose items is open any more."""
    open_items = BatchItem.objects.filter(batch=OuterRef("pk"), status__in=OPEN_ITEM_STATUSES)
    ids = (
        Batch.objects.filter(status__in=(*ACTIVE_BATCH_STATUSES, "cancelled"), completed_at__isnull=True)
        .filter(~Exists(open_items))
        .values_list("id", flat=True)[:limit]
    )
    return [str(i) for i in ids]


def reconcile(ensure: Callable[[], object]) -> dict:
    """One reconciler pass; ``ensure()`` starts dispatchers if fewer than the target are alive."""
    requeued = requeue_expired_claims()
    expired = []
    for bid in overdue_batches():
        if expire_unsent(bid):
            expired.append(bid)
    for bid in cancelled_with_unsent():
        cancel_claimable(bid)
    finalized = [bid for bid in finished_but_open() if finalize_batch_if_done(bid)]
    ensured = False
    if work_remains():
        ensure()
        ensured = True
    kicked = due.kick_due()
    if requeued or expired or finalized:
        log.info(
            "reconciler: requeued claims of %d batch(es), expired %d, finalized %d",
            len(requeued),
            len(expired),
            len(finalized),
        )
    return {
        "requeued": requeued,
        "expired": expired,
        "finalized": finalized,
        "ensured": ensured,
        "due": kicked,
    }


class Reaper(threading.Thread):
    """Runs ``reconcile`` every lease/3 seconds until stopped (daemon: ends with the process)."""

    def __init__(self, ensure: Callable[[], object]):
        super().__init__(name="gateway-reaper", daemon=True)
        self.ensure = ensure
        self.stopped = threading.Event()

    @staticmethod
    def interval() -> float:
        return max(1.0, float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3)

    def run(self) -> None:
        while not self.stopped.wait(self.interval()):
            try:
                reconcile(self.ensure)
            except Exception:  # noqa: BLE001 - a reconciler hiccup must never kill the worker
                log.exception("reconciler pass failed")
            finally:
                connection.close()

"""What every execution module shares: claim owners (this process's identity plus one per dispatcher
slice), the claim lease, status maps, and the bounded ride-through for database blips."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from batches.models import ItemStatus
from gateway_engine.errors import Unavailable
from gateway_engine.outage import OutageBackoff
from gateway_site.forksafe import ProcessLocal

log = logging.getLogger("batches.execution")

ENGINE_TO_ITEM_STATUS = {
    "succeeded": ItemStatus.SUCCEEDED,
    "failed": ItemStatus.FAILED,
    "cancelled": ItemStatus.CANCELLED,
    "expired": ItemStatus.EXPIRED,
}
OPEN_ITEM_STATUSES = (ItemStatus.PENDING, ItemStatus.RUNNING)

T = TypeVar("T")


def _process_identity() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


# Built on first use in each process and rebuilt in a forked child (a prefork pool's children must
# never share their master's identity: docs/engine.md, "Processes and fork").
_PROCESS_ID = ProcessLocal(_process_identity)


def worker_id() -> str:
    """This process's identity (host:pid:random), built after fork. Not a claim owner by itself: claims
    belong to one slice (``new_owner``)."""
    return _PROCESS_ID.get()


def new_owner() -> str:
    """A claim owner for one dispatcher slice: this process's identity plus
    a random part (host:pid:random:random). Two slices of one process (threads of a threads pool, a
    slice that ends while another starts) never renew, release or write each other's claims; the
    reconciler still sees the process in it."""
    return f"{worker_id()}:{uuid.uuid4().hex[:8]}"


def claim_lease() -> timedelta:
    return timedelta(seconds=float(settings.GATEWAY_CLAIM_LEASE_SECONDS))


class OutageTooLong(Unavailable, RuntimeError):
    """A dependency stayed down longer than GATEWAY_OUTAGE_RIDE_SECONDS."""

    code = "outage_too_long"


def ride_through(what: str, fn: Callable[[], T], *, errors: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``fn``; on a database (or one of ``errors``) failure log loudly, back off and try again by
    the engine's outage rule (``gateway_engine.outage.OutageBackoff``: 0.2 s doubling to 2 s), for at
    most GATEWAY_OUTAGE_RIDE_SECONDS counted from the first call; then raise OutageTooLong."""
    backoff = OutageBackoff(float(settings.GATEWAY_OUTAGE_RIDE_SECONDS)).start_now()
    failures = 0
    while True:
        try:
            result = fn()
        except (OperationalError, InterfaceError, *errors) as exc:
            failures += 1
            if isinstance(exc, (OperationalError, InterfaceError)):
                try:
                    connection.close()
                except Exception:  # noqa: BLE001 - the connection is broken anyway
                    pass
            delay = backoff.next_delay()
            if delay is None:
                log.error("%s: still failing after %d tries, giving up: %s", what, failures, exc)
                raise OutageTooLong(f"{what}: {exc}") from exc
            log.error(
                "%s failed (%s: %s); execution paused, retrying in %.1f s",
                what,
                type(exc).__name__,
                exc,
                delay,
            )
            time.sleep(delay)
            continue
        if failures:
            log.warning("%s: recovered after %d failed tries", what, failures)
        return result

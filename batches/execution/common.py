"""What every execution module shares: this process's worker identity, the claim lease, status maps,
and the bounded ride-through for database blips."""

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

log = logging.getLogger("batches.execution")

ENGINE_TO_ITEM_STATUS = {
    "succeeded": ItemStatus.SUCCEEDED,
    "failed": ItemStatus.FAILED,
    "cancelled": ItemStatus.CANCELLED,
    "expired": ItemStatus.EXPIRED,
}
OPEN_ITEM_STATUSES = (ItemStatus.PENDING, ItemStatus.RUNNING)

_WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

T = TypeVar("T")


def worker_id() -> str:
    """Identity written to claimed_by (host:pid:random, per process)."""
    return _WORKER_ID


def claim_lease() -> timedelta:
    return timedelta(seconds=float(settings.GATEWAY_CLAIM_LEASE_SECONDS))


class OutageTooLong(RuntimeError):
    """A dependency stayed down longer than GATEWAY_OUTAGE_RIDE_SECONDS."""


def ride_through(what: str, fn: Callable[[], T], *, errors: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``fn``; on a database (or one of ``errors``) failure log loudly, back off (0.2 s doubling
    to 2 s) and try again, for at most GATEWAY_OUTAGE_RIDE_SECONDS; then raise OutageTooLong."""
    give_up = time.monotonic() + float(settings.GATEWAY_OUTAGE_RIDE_SECONDS)
    delay, failures = 0.2, 0
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
            if time.monotonic() + delay > give_up:
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
            delay = min(2.0, delay * 2)
            continue
        if failures:
            log.warning("%s: recovered after %d failed tries", what, failures)
        return result

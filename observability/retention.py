"""Retention: delete prompts, responses and uploaded files older than GATEWAY_RETENTION_DAYS, keep batch
stats, counters and usage.

A batch is old when it finished (``completed_at``) before the cutoff. Its items keep their status,
provider, attempts, latency, tokens, error type/code/message and attempt log (no bodies in there);
``payload`` (the prompt) becomes ``{"purged_at": …}`` and ``response`` null. Batch.stats and
TeamUsageDaily are not touched. Work is done in short transactions of CHUNK items, and items already
purged are skipped, so the command is safe to run repeatedly and concurrently (cron or Celery beat).

Other kinds of stored content (e.g. the /v1/files uploads) plug in with ``register_purger``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

CHUNK = 2000
PURGED_KEY = "purged_at"

# name -> fn(cutoff, dry_run) -> number of objects purged (or that would be)
_purgers: dict[str, Callable[[dt.datetime, bool], int]] = {}


def register_purger(name: str, fn: Callable[[dt.datetime, bool], int]) -> None:
    _purgers[name] = fn


@dataclass
class RetentionReport:
    cutoff: dt.datetime
    dry_run: bool
    purged: dict[str, int] = field(default_factory=dict)


def purge_items(cutoff: dt.datetime, dry_run: bool = False) -> int:
    from batches.models import Batch, BatchItem

    old_batches = Batch.objects.filter(completed_at__lt=cutoff).values("pk")
    pending = BatchItem.objects.filter(batch__in=old_batches).exclude(payload__has_key=PURGED_KEY)
    if dry_run:
        return pending.count()
    marker = {PURGED_KEY: timezone.now().isoformat(timespec="seconds")}
    total = 0
    while True:
        with transaction.atomic():
            ids = list(pending.order_by("pk").values_list("pk", flat=True)[:CHUNK])
            if not ids:
                return total
            total += BatchItem.objects.filter(pk__in=ids).update(payload=marker, response=None)


register_purger("items", purge_items)


def purge_old_data(days: int, *, dry_run: bool = False, now: dt.datetime | None = None) -> RetentionReport:
    if days < 1:
        raise ValueError("days must be >= 1")
    cutoff = (now or timezone.now()) - dt.timedelta(days=days)
    report = RetentionReport(cutoff=cutoff, dry_run=dry_run)
    for name, fn in _purgers.items():
        report.purged[name] = fn(cutoff, dry_run)
    return report

"""Retention: delete the prompts and answers of batches finished more than GATEWAY_RETENTION_DAYS ago, and
the /v1 files that expired or belong to such batches, with their blobs; keep batch stats, counters and
usage.

A batch is old when it finished (``completed_at``) before the cutoff. Its items keep their status,
provider, attempts, latency, tokens, error type/code/message and attempt log (no bodies in there);
``payload`` (the prompt) becomes ``{"purged_at": …}`` and ``response`` and ``native_response`` (the
answer, as translated and as the provider gave it) null. Batch.stats and
TeamUsageDaily are not touched. Work is done in short transactions of CHUNK items, and items already
purged are skipped, so the command is safe to run repeatedly and concurrently (cron or Celery beat).

The purgers are listed in ``PURGERS``: the items here, the /v1 files in openai_api.retention, the webhook
delivery log in webhooks.retention and the response cache in response_cache.retention (observability
sits above these apps in the import layers, so it names them). A purger is ``fn(cutoff, dry_run, now)``; ``cutoff`` is
None when retention is off (days 0), and a purger with nothing to do then returns None (not reported).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from batches.models import Batch, BatchItem
from interactive.retention import purge_calls
from openai_api.retention import purge_files
from response_cache.retention import purge_cache
from webhooks.retention import purge_deliveries

CHUNK = 2000
PURGED_KEY = "purged_at"

# name -> fn(cutoff or None, dry_run, now) -> number of objects purged (or that would be); None: not run
Purger = Callable[[dt.datetime | None, bool, dt.datetime], int | None]


@dataclass
class RetentionReport:
    cutoff: dt.datetime | None  # None: retention off (only what expires by itself was purged)
    dry_run: bool
    purged: dict[str, int] = field(default_factory=dict)


def purge_items(
    cutoff: dt.datetime | None, dry_run: bool = False, now: dt.datetime | None = None
) -> int | None:
    if cutoff is None:
        return None
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
            total += BatchItem.objects.filter(pk__in=ids).update(
                payload=marker, response=None, native_response=None
            )


PURGERS: dict[str, Purger] = {
    "items": purge_items,
    "files": purge_files,
    "interactive_calls": purge_calls,
    "webhook_deliveries": purge_deliveries,
    "cache_entries": purge_cache,
}


def purge_old_data(
    days: int | None, *, dry_run: bool = False, now: dt.datetime | None = None
) -> RetentionReport:
    """Run every purger. ``days`` None or 0: retention is off, only what expires by itself (the /v1 files
    past their ``expires_at``) is purged."""
    if days is not None and days < 0:
        raise ValueError("days must be >= 0")
    now = now or timezone.now()
    cutoff = now - dt.timedelta(days=days) if days else None
    report = RetentionReport(cutoff=cutoff, dry_run=dry_run)
    for name, fn in PURGERS.items():
        n = fn(cutoff, dry_run, now)
        if n is not None:
            report.purged[name] = n
    return report

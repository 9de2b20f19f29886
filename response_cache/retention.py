"""Retention of the response cache (listed in observability.retention.PURGERS, run by
``manage.py purge_old_data``): entries past GATEWAY_CACHE_TTL_SECONDS and dedup leaders past their
lease are deleted, whatever GATEWAY_RETENTION_DAYS says; with retention on (days > 0), entries stored
before the cutoff go too (they hold answers, which retention drops). Safe to repeat."""

from __future__ import annotations

import datetime as dt

from .models import CacheEntry
from .services import purge_expired


def purge_cache(
    cutoff: dt.datetime | None, dry_run: bool = False, now: dt.datetime | None = None
) -> int | None:
    total = purge_expired(now, dry_run=dry_run)
    if cutoff is not None:
        old = CacheEntry.objects.filter(created_at__lt=cutoff)
        total += old.count() if dry_run else int(old.delete()[0])
    return total if total or cutoff is not None else None

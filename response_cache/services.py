"""Write side of the response cache: store answers (bounded in bytes, oldest evicted first), clear a
team's entries, purge expired ones, and the in-flight leaders of dedup (lead / renew / release).

Only successful answers are stored (the caller's rule, batches.execution.cache_stage). A key stored
twice keeps the later answer (``ON CONFLICT (key) DO UPDATE``). The bound is enforced after every store
by the gateway itself: entries beyond GATEWAY_CACHE_MAX_BYTES, counted from the newest, are deleted
(checked once per 1/64 of the bound stored by a process)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .models import CacheEntry, InFlight

# what of a successful result is stored and served again (the RESULT's response and usage)
ANSWER_FIELDS = (
    "response",
    "native_response",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "cache_write_tokens",
)


@dataclass(frozen=True, slots=True)
class NewEntry:
    key: str
    team_id: int | None
    provider: str
    answer: Mapping[str, Any]


def ttl() -> dt.timedelta:
    return dt.timedelta(seconds=int(settings.GATEWAY_CACHE_TTL_SECONDS))


def store(entries: Iterable[NewEntry], *, now: dt.datetime | None = None) -> int:
    """Store (or refresh) answers, then evict down to the bound. Returns the entries written."""
    now = now or timezone.now()
    rows = {}
    for entry in entries:
        text = json.dumps(dict(entry.answer), sort_keys=True, allow_nan=False)
        rows[entry.key] = CacheEntry(
            key=entry.key,
            team_id=entry.team_id,
            provider=entry.provider,
            answer=json.loads(text),
            bytes=len(text.encode("utf-8")),
            created_at=now,
            expires_at=now + ttl(),
        )
    if not rows:
        return 0
    CacheEntry.objects.bulk_create(
        list(rows.values()),
        update_conflicts=True,
        unique_fields=["key"],
        update_fields=["team", "provider", "answer", "bytes", "created_at", "expires_at"],
    )
    evict_to_bound(added=sum(row.bytes for row in rows.values()))
    return len(rows)


_EVICT_SQL = (
    "DELETE FROM {t} WHERE id IN (SELECT id FROM (SELECT id, SUM(bytes) OVER "
    "(ORDER BY created_at DESC, id DESC) AS upto FROM {t}) s WHERE s.upto > %s)"
)


# bytes this process stored since it last checked the bound: the SUM over the table is read once per
# 1/64 of the bound stored (a store of a few rows does not scan every entry), so the cache may exceed
# the bound by that much between checks
_unchecked = [0]
CHECK_FRACTION = 64


def evict_to_bound(max_bytes: int | None = None, *, added: int | None = None) -> int:
    """Delete the oldest entries until the rest fit in ``max_bytes`` (GATEWAY_CACHE_MAX_BYTES).
    ``added``: bytes just stored; the check is skipped until 1/64 of the bound was added."""
    bound = int(settings.GATEWAY_CACHE_MAX_BYTES if max_bytes is None else max_bytes)
    from .selectors import stored_bytes

    if added is not None:
        _unchecked[0] += added
        if _unchecked[0] < bound // CHECK_FRACTION:
            return 0
    _unchecked[0] = 0
    if stored_bytes() <= bound:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_EVICT_SQL.format(t=CacheEntry._meta.db_table), [bound])
        return int(cursor.rowcount)


def clear_team(team_id: int) -> int:
    """Delete every entry the team stored (admin action, ``manage.py clear_cache --team NAME``)."""
    return int(CacheEntry.objects.filter(team_id=team_id).delete()[0])


def clear_all() -> int:
    return int(CacheEntry.objects.all().delete()[0])


def purge_expired(now: dt.datetime | None = None, *, dry_run: bool = False) -> int:
    """Entries past their TTL and leaders past their lease (retention, purge_old_data)."""
    now = now or timezone.now()
    entries = CacheEntry.objects.filter(expires_at__lte=now)
    leaders = InFlight.objects.filter(expires_at__lte=now)
    if dry_run:
        return entries.count() + leaders.count()
    with transaction.atomic():
        return int(entries.delete()[0]) + int(leaders.delete()[0])


# ---- in-flight leaders ----------------------------------------------------------------------------------

_LEAD_SQL = (
    "INSERT INTO {t} (key, owner, expires_at) SELECT k, %s, %s FROM unnest(%s::varchar[]) AS k "
    "ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
    "WHERE {t}.expires_at <= %s OR {t}.owner = EXCLUDED.owner RETURNING key"
)


def lead(keys: Iterable[str], owner: str, lease_seconds: float) -> set[str]:
    """Take the lead of these dedup keys for ``owner``: the keys nobody else holds (free, or held past
    its lease by a leader that died). Returns the keys won."""
    wanted = sorted(set(keys))
    if not wanted:
        return set()
    now = timezone.now()
    until = now + dt.timedelta(seconds=lease_seconds)
    with connection.cursor() as cursor:
        cursor.execute(_LEAD_SQL.format(t=InFlight._meta.db_table), [owner, until, wanted, now])
        return {row[0] for row in cursor.fetchall()}


def renew(owner: str, lease_seconds: float) -> int:
    """Keep ``owner``'s leads alive (called while its items run)."""
    until = timezone.now() + dt.timedelta(seconds=lease_seconds)
    return int(InFlight.objects.filter(owner=owner).update(expires_at=until))


def release(keys: Iterable[str], owner: str) -> int:
    """Give up ``owner``'s leads of these keys (the answer is stored, or the leader failed)."""
    wanted = list(set(keys))
    if not wanted:
        return 0
    return int(InFlight.objects.filter(key__in=wanted, owner=owner).delete()[0])

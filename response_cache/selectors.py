"""Read side of the response cache."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Sum
from django.utils import timezone

from .models import CacheEntry, InFlight


def live_entries(keys: Iterable[str]) -> dict[str, CacheEntry]:
    """{key: entry} of the keys with an unexpired entry."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    rows = CacheEntry.objects.filter(key__in=wanted, expires_at__gt=timezone.now()).only(
        "key", "provider", "answer"
    )
    return {row.key: row for row in rows}


def held_keys(keys: Iterable[str]) -> set[str]:
    """The dedup keys some leader still holds (unexpired)."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return set()
    return set(
        InFlight.objects.filter(key__in=wanted, expires_at__gt=timezone.now()).values_list("key", flat=True)
    )


def stored_bytes() -> int:
    return int(CacheEntry.objects.aggregate(n=Sum("bytes"))["n"] or 0)

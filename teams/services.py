"""Write-side services for teams and API keys (create a team, create or revoke a key)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from .keys import generate_raw_key, hash_key, visible_prefix
from .models import ApiKey, Team


def create_team(name: str) -> tuple[Team, bool]:
    name = name.strip()
    if not name:
        raise ValueError("team name: must not be empty")
    if len(name) > 100:
        raise ValueError("team name: at most 100 characters")
    return Team.objects.get_or_create(name=name)


@transaction.atomic
def create_api_key(team: Team, name: str = "") -> tuple[ApiKey, str]:
    """Create a key for `team`. Returns the stored row and the raw key, which exists only here."""
    raw = generate_raw_key()
    key = ApiKey.objects.create(team=team, name=name, prefix=visible_prefix(raw), key_hash=hash_key(raw))
    return key, raw


def revoke_api_key(key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])

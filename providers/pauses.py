"""Provider pauses (issue #21): a provider whose account is out of quota is paused for every worker.

The engine pauses a provider through the quota store (``store.pause_provider``) when its answer says
waiting will not help soon: billing or spend exhausted (reason ``billing``: until an operator clears it)
or a per-day quota used up (``per_day_quota``: until the provider's day ends). Nothing more is sent to
it until then; items fall back to the route's other providers.

This module is the operator's side of it, shared by the admin action and ``manage.py
clear_provider_pause``: describing a pause, lifting it, and the audit entries (who cleared which
pause; when the engine set one), and the durable record (``ProviderPause``, providers/pause_record.py):
written when the engine pauses, removed when the pause is cleared, each change announced on the config
channel (``bump_config_version``) so every process's LimitsSource reloads it at once, holds it in its
store's local view (waking the items that wait for that provider, a Retry-After included) and writes it
back into the store after a Redis restart. Not the 429 Retry-After pause of one bucket (``clear_pause_sync``).
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from gateway_engine.quota.types import PauseState

AUDIT_MODEL = "provider"
ACTION_PAUSED = "paused"
ACTION_CLEARED = "pause cleared"


def until_text(until_epoch: float | None) -> str:
    """'until cleared' or 'until 2026-12-02 08:00 UTC'."""
    if until_epoch is None:
        return "until cleared"
    return f"until {dt.datetime.fromtimestamp(until_epoch, dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


def badge(state: PauseState) -> str:
    """What the providers page shows: 'quota exhausted' (no end: an operator clears it) or
    'paused until …' (the provider's quota period ends then)."""
    return "quota exhausted" if state.until_epoch is None else "paused " + until_text(state.until_epoch)


def describe(state: PauseState) -> str:
    """One line: reason, until when, and the provider's own message."""
    text = f"{state.reason} {until_text(state.until_epoch)}"
    if state.since_epoch:
        text += f" (since {dt.datetime.fromtimestamp(state.since_epoch, dt.UTC):%Y-%m-%d %H:%M:%S} UTC)"
    return text + (f": {state.message}" if state.message else "")


def as_change(state: PauseState) -> dict:
    """The pause as the audit history stores it."""
    return {"reason": state.reason, "until_epoch": state.until_epoch, "message": state.message[:500]}


def _record(provider_name: str, action: str, changes: dict) -> None:
    """An entry in the audit history (audit connects to ``provider_action``; the actor is the request's
    user, ``command:<name>``, or ``system``/``code`` in a worker)."""
    from providers.models import Provider
    from providers.signals import provider_action

    pk = Provider.objects.filter(name=provider_name).values_list("pk", flat=True).first()
    provider_action.send(
        sender=Provider,
        model=AUDIT_MODEL,
        object_id=str(pk if pk is not None else provider_name),
        object_repr=provider_name,
        action=action,
        changes=changes,
    )


def clear(provider_name: str) -> PauseState | None:
    """Lift the provider's pause for every worker and record who did (the audit actor: the admin user,
    or ``command:clear_provider_pause``); the pause that was lifted, or None when there was none.
    Raises QuotaStoreUnavailable when the store cannot be reached."""
    from providers.limits.factory import lift_provider_pause_sync

    # the record first (announced): a worker that reloads meanwhile no longer writes it back into the
    # store after the store's pause is lifted below
    durable = forget(provider_name)
    state = lift_provider_pause_sync(provider_name)
    if state is None and durable is not None:  # only the durable record held it (Redis lost it)
        state = durable
    if state is not None:
        _record(provider_name, ACTION_CLEARED, {"provider_pause": {"old": as_change(state), "new": None}})
    return state


def record_paused(provider_name: str, state: PauseState) -> None:
    """The audit entry of a pause the engine set (observability.engine's on_provider_paused)."""
    remember(provider_name, state)
    _record(provider_name, ACTION_PAUSED, {"provider_pause": {"old": None, "new": as_change(state)}})


def _when(epoch: float | None) -> dt.datetime | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, dt.UTC)


def remember(provider_name: str, state: PauseState) -> bool:
    """Store the pause durably (never shortening a longer one held) and announce it on the config
    channel; True if the record changed. An unknown provider (deleted meanwhile) stores nothing."""
    from providers.live_config import bump_config_version
    from providers.models import Provider, ProviderPause

    with transaction.atomic():
        provider = Provider.objects.select_for_update().filter(name=provider_name).first()
        if provider is None:
            return False
        held = ProviderPause.objects.filter(provider=provider).first()
        if held is not None and not held.expired(timezone.now()):
            if held.as_state(provider_name).outlasts(state.until_epoch):
                return False
        ProviderPause.objects.update_or_create(
            provider=provider,
            defaults={
                "reason": state.reason,
                "until": _when(state.until_epoch),
                "message": state.message,
                "since": _when(state.since_epoch) if state.since_epoch else timezone.now(),
            },
        )
        transaction.on_commit(bump_config_version)
    return True


def forget(provider_name: str) -> PauseState | None:
    """Remove the durable record (announced on the config channel); the pause it held, or None."""
    from providers.live_config import bump_config_version
    from providers.models import ProviderPause

    with transaction.atomic():
        held = ProviderPause.objects.filter(provider__name=provider_name).first()
        if held is None:
            return None
        held.delete()
        transaction.on_commit(bump_config_version)
    return None if held.expired(timezone.now()) else held.as_state(provider_name)


def durable_pauses() -> dict[str, PauseState]:
    """Every provider's durable pause that has not ended, by provider name (LimitsSource loads them
    with the live config; sync ORM code, run in a worker thread)."""
    from providers.models import ProviderPause

    now = timezone.now()
    rows = ProviderPause.objects.select_related("provider")
    return {row.provider.name: row.as_state(row.provider.name) for row in rows if not row.expired(now)}

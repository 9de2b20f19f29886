"""Record every change to Provider, RoutingRule, Team and ApiKey (signals: pre_save reads the old row,
post_save/post_delete write a ConfigChange). Management commands are wrapped so their changes name the
command (``command:load_providers``). Bulk ``QuerySet.update()`` bypasses signals: code that changes
these models must save instances (the admin's revoke action does)."""

from __future__ import annotations

import weakref
from decimal import Decimal

from django.db.models.signals import post_delete, post_save, pre_save

from . import context

SECRET_FIELDS = {"api_key", "key_hash"}
SKIP_FIELDS = {"id", "created_at", "updated_at", "last_used_at"}


def _tracked():
    from providers.models import Provider, RoutingRule
    from teams.models import ApiKey, Team

    return {Provider: "provider", RoutingRule: "routing rule", Team: "team", ApiKey: "API key"}


def _fields(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname not in SKIP_FIELDS]


def _plain(value):
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _snapshot(instance) -> dict:
    return {name: _plain(getattr(instance, name)) for name in _fields(type(instance))}


def _describe(model, instance) -> str:
    if model.__name__ == "RoutingRule":
        provider = instance.provider.name if instance.provider_id else "?"
        return f"{instance.route} → {provider}"[:200]
    return str(instance)[:200]


def _diff(old: dict, new: dict) -> dict:
    out = {}
    for name, value in new.items():
        before = old.get(name)
        if before == value:
            continue
        out[name] = "changed" if name in SECRET_FIELDS else {"old": before, "new": value}
    return out


def _record(instance, action: str, changes: dict) -> None:
    from .models import ConfigChange

    actor, via = context.current()
    model = type(instance)
    ConfigChange.objects.create(
        actor=actor,
        via=via,
        model=_tracked()[model],
        object_id=str(instance.pk),
        object_repr=_describe(model, instance),
        action=action,
        changes=changes,
    )


# the row as stored, per model instance being saved (by id(); dropped when the instance is collected)
_snapshots: dict[int, dict | None] = {}
_commands_wrapped = False


def _remember(instance, snapshot: dict | None) -> None:
    key = id(instance)
    if key not in _snapshots:
        weakref.finalize(instance, _snapshots.pop, key, None)
    _snapshots[key] = snapshot


def _forget(instance) -> None:
    _remember(instance, None)


def _pre_save(sender, instance, raw=False, **kwargs) -> None:
    if raw or instance.pk is None:
        _forget(instance)
        return
    row = sender.objects.filter(pk=instance.pk).values(*_fields(sender)).first()
    _remember(instance, {k: _plain(v) for k, v in row.items()} if row is not None else None)


def _post_save(sender, instance, created, raw=False, **kwargs) -> None:
    if raw:
        return
    new = _snapshot(instance)
    old = _snapshots.get(id(instance))
    if created or old is None:
        changes: dict = {}
        for name, value in new.items():
            if name in SECRET_FIELDS:
                if value:
                    changes[name] = "set"
            elif value not in (None, ""):  # a new object: its set fields
                changes[name] = {"old": None, "new": value}
        _record(instance, "created", changes)
        _remember(instance, new)
        return
    changes = _diff(old, new)
    if not changes:
        return
    revoked = sender.__name__ == "ApiKey" and set(changes) == {"revoked_at"} and new["revoked_at"]
    action = "revoked" if revoked else "updated"
    _record(instance, action, changes)
    _remember(instance, new)


def _post_delete(sender, instance, **kwargs) -> None:
    old = _snapshot(instance)
    changes = {k: ("changed" if k in SECRET_FIELDS else {"old": v, "new": None}) for k, v in old.items()}
    _record(instance, "deleted", changes)


def _wrap_commands() -> None:
    """Every management command runs as actor "system", via "command:<name>"."""
    from django.core.management.base import BaseCommand

    global _commands_wrapped
    if _commands_wrapped:
        return
    original = BaseCommand.execute

    def execute(self, *args, **options):
        name = type(self).__module__.rsplit(".", 1)[-1]
        with context.acting_as("system", f"command:{name}"):
            return original(self, *args, **options)

    BaseCommand.execute = execute
    _commands_wrapped = True


def connect() -> None:
    for model in _tracked():
        uid = f"audit-{model._meta.label_lower}"
        pre_save.connect(_pre_save, sender=model, dispatch_uid=uid + "-pre", weak=False)
        post_save.connect(_post_save, sender=model, dispatch_uid=uid + "-post", weak=False)
        post_delete.connect(_post_delete, sender=model, dispatch_uid=uid + "-del", weak=False)
    _wrap_commands()

"""Staff and team actions on batches in the config history (issue #29): who cancelled, retried or read
the prompts and answers of which batch, beside who changed which limit (audit.signals)."""

from __future__ import annotations

from . import context


def record_action(
    model: str, object_id: str, object_repr: str, action: str, changes: dict | None = None
) -> None:
    """One ConfigChange row with the current actor (the request's user, the API key's team, or
    command:<name>)."""
    from .models import ConfigChange

    actor, via = context.current()
    ConfigChange.objects.create(
        actor=actor,
        via=via,
        model=model[:50],
        object_id=str(object_id)[:64],
        object_repr=object_repr[:200],
        action=action[:16],
        changes=changes or {},
    )


def on_batch_action(
    sender, model: str, object_id: str, object_repr: str, action: str, changes: dict | None, **kwargs
) -> None:
    """Receiver of ``batches.signals.batch_action`` (connected in audit.apps)."""
    record_action(model, object_id, object_repr, action, changes)

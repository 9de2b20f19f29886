"""Config-change fan-out (workers reload on commit) and ``provider_action``.

* ``provider_action(model, object_id, object_repr, action, changes)`` — an action on a provider that is not
  a model save (the engine pausing it, an operator clearing the pause: providers.pauses). audit connects its
  recorder (audit.apps), as for ``batches.signals.batch_action``: providers sits below audit in the import
  layers (tests/architecture/test_layers.py) and does not import it.
"""

import logging

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal, receiver

from .limits.budgets import forget_ledger_if_unbudgeted
from .live_config import bump_config_version
from .models import Provider, RoutingRule

log = logging.getLogger(__name__)

provider_action = Signal()


@receiver([post_save, post_delete], sender=Provider)
@receiver([post_save, post_delete], sender=RoutingRule)
@receiver([post_save, post_delete], sender="teams.Team")  # budgets and share caps are live too
def _config_changed(**kwargs) -> None:
    transaction.on_commit(bump_config_version)


@receiver(post_save, sender="teams.Team")
def _team_saved(instance, **kwargs) -> None:
    def forget() -> None:
        try:
            forget_ledger_if_unbudgeted(instance)
        except Exception:  # noqa: BLE001 - the save stands; a stale ledger is re-seeded when it expires
            log.exception("could not drop the budget ledger of team %s", instance.name)

    transaction.on_commit(forget)

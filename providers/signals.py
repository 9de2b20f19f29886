from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .live_config import bump_config_version
from .models import Provider, RoutingRule


@receiver([post_save, post_delete], sender=Provider)
@receiver([post_save, post_delete], sender=RoutingRule)
@receiver([post_save, post_delete], sender="batches.Team")  # budgets and share caps are live too
def _config_changed(**kwargs) -> None:
    transaction.on_commit(bump_config_version)

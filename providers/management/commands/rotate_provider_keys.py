"""Re-seal every stored provider key with the newest of GATEWAY_SECRET_KEYS (docs/operations.md, "Provider
keys at rest"). Rotation: put the new key first in GATEWAY_SECRET_KEYS (the old one after it), restart,
run this, then drop the old key. All rows or none: a key that none of GATEWAY_SECRET_KEYS opens stops
the command before anything is written, naming its provider."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from providers.models import Provider
from providers.secrets import ProviderKeyUnreadable, reseal


class Command(BaseCommand):
    help = "Re-encrypt every stored provider key with the newest key of GATEWAY_SECRET_KEYS."

    def handle(self, *args, **options):
        with transaction.atomic():
            rows = list(
                Provider.objects.select_for_update().exclude(api_key="").only("pk", "name", "api_key")
            )
            resealed = []
            for provider in rows:
                try:
                    resealed.append((provider.pk, reseal(provider.api_key)))
                except ProviderKeyUnreadable as exc:
                    raise CommandError(f"provider {provider.name}: {exc}; nothing was changed") from None
            for pk, value in resealed:
                Provider.objects.filter(pk=pk).update(api_key=value)
        self.stdout.write(
            f"re-sealed {len(resealed)} provider key(s) with the newest GATEWAY_SECRET_KEYS key"
        )

"""manage.py clear_provider_pause NAME: lift a provider's pause (quota exhausted / per-day quota).

The engine pauses a provider for every worker when its answer says its account is out of quota
(billing/spend exhausted: until cleared; a per-day quota: until the provider's day ends). This lifts
it now, says what was lifted, and records it in the audit history (actor ``command:clear_provider_pause``).
Exit 1 for an unknown provider or a provider without a pause. Not the 429 Retry-After pause (the admin's
"Clear the rate-limit pause (429) now")."""

from django.core.management.base import CommandError

from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_site.commands import DatabaseCommand
from providers import pauses
from providers.models import Provider


class Command(DatabaseCommand):
    help = "Lift a provider's pause (quota exhausted / per-day quota) for every worker."

    def add_arguments(self, parser):
        parser.add_argument("name", help="The provider's name.")

    def handle(self, *args, **options):
        name = options["name"]
        if not Provider.objects.filter(name=name).exists():
            known = ", ".join(Provider.objects.order_by("name").values_list("name", flat=True)) or "none"
            raise CommandError(f"unknown provider {name!r} (known: {known})")
        try:
            state = pauses.clear(name)
        except QuotaStoreUnavailable as exc:
            raise CommandError(f"quota store unavailable: {exc}") from None
        if state is None:
            raise CommandError(f"provider {name} has no pause to clear (quota exhausted / per-day quota)")
        self.stdout.write(
            self.style.SUCCESS(f"cleared the pause of provider {name}: {pauses.describe(state)}")
        )

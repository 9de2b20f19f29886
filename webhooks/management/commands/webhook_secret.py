"""manage.py webhook_secret --team NAME [--url URL] [--rotate] (docs/contract.md §6).

Prints the team's signing secret (``whsec_…``) as the LAST line: created if the team has none, else the
current one; ``--rotate`` makes a new one (the previous one also signs deliveries for 24 h, both
signatures in the header). ``--url`` sets the team's default webhook_url (same rule as a batch's;
``--url ""`` clears it)."""

from __future__ import annotations

from django.core.management.base import CommandError

from batches.submission import webhook_url
from gateway_site.commands import DatabaseCommand
from teams.models import Team
from webhooks import services
from webhooks.signing import OVERLAP


class Command(DatabaseCommand):
    help = "Print (creating it if needed) a team's webhook signing secret; --rotate, --url URL."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="Team name (see create_team).")
        parser.add_argument("--url", default=None, help="Set the team's default webhook_url ('' clears it).")
        parser.add_argument(
            "--rotate", action="store_true", help="Make a new secret; the old one also signs for 24 h."
        )

    def handle(self, *args, **options):
        try:
            team = Team.objects.get(name=options["team"])
        except Team.DoesNotExist:
            raise CommandError(
                f"--team: no team named {options['team']!r} (create it with create_team)"
            ) from None
        if options["url"] is not None:
            try:
                services.check_url(options["url"])
            except webhook_url.WebhookUrlError as exc:
                raise CommandError(f"--url: webhook_url {exc}") from None
        hook, created = services.ensure_team_webhook(team.pk)
        if options["url"] is not None:
            hook = services.set_team_url(team.pk, options["url"])
            self.stderr.write(f"default webhook_url of team {team.name}: {hook.url or '(none)'}")
        if options["rotate"] and not created:
            hook = services.rotate_secret(team.pk)
            self.stderr.write(
                f"rotated: the previous secret also signs deliveries until {hook.rotated_at + OVERLAP}"
            )
        elif created:
            self.stderr.write(f"created a webhook secret for team {team.name}")
        self.stdout.write(hook.secret)

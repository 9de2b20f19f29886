from argparse import ArgumentParser
from typing import Any

from django.core.management.base import CommandError

from gateway_site.commands import DatabaseCommand
from teams.models import Team
from teams.services import create_api_key


class Command(DatabaseCommand):
    help = "Create an API key for a team. The raw key is the LAST line printed and is not stored."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--team", required=True)
        parser.add_argument("--name", default="", help="The key's name (the admin's \"name\" column).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            team = Team.objects.get(name=options["team"])
        except Team.DoesNotExist:
            raise CommandError(
                f"--team: no team named {options['team']!r} (create it with create_team)"
            ) from None
        if len(options["name"]) > 100:
            raise CommandError("--name: at most 100 characters")
        key, raw = create_api_key(team, options["name"])
        self.stdout.write(
            f"created API key {key.prefix}… for team {team.name}; it is shown once, store it now:"
        )
        self.stdout.write(raw)

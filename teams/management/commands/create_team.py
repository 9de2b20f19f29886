from argparse import ArgumentParser
from typing import Any

from django.core.management.base import CommandError

from gateway_site.commands import DatabaseCommand
from teams.services import create_team


class Command(DatabaseCommand):
    help = "Create a team (no error if it already exists)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        try:
            team, created = create_team(name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{'created' if created else 'exists'}: team {team.name}")

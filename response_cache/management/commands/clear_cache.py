"""python manage.py clear_cache --team NAME | --all  (delete a team's response-cache entries; docs/cache.md)"""

from __future__ import annotations

from django.core.management.base import CommandError

from gateway_site.commands import DatabaseCommand
from response_cache.services import clear_all, clear_team
from teams.models import Team


class Command(DatabaseCommand):
    help = "Delete the response-cache entries a team stored (--team NAME), or every entry (--all)."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--team", help="Team name (see create_team).")
        which.add_argument("--all", action="store_true", help="Every team's entries.")

    def handle(self, *args, team=None, all=False, **options):  # noqa: A002 - the option's name
        if all:
            self.stdout.write(f"cleared {clear_all()} cache entries")
            return
        found = Team.objects.filter(name=team).first()
        if found is None:
            raise CommandError(f"--team: no team named {team!r}")
        self.stdout.write(f"cleared {clear_team(found.id)} cache entries of team {found.name}")

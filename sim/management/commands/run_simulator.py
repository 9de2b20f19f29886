"""``python manage.py run_simulator --config FILE --port N``: serve the provider simulator."""

from django.core.management.base import BaseCommand, CommandError

from sim.cli import add_arguments, run
from sim.config import ConfigError


class Command(BaseCommand):
    help = "Run the OpenAI-compatible provider simulator (several rate-limited providers on one port)."

    def add_arguments(self, parser):
        add_arguments(parser)

    def handle(self, *args, **opts):
        try:
            run(opts["config"], opts["host"], opts["port"], opts["time_scale"], opts["duration"])
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc

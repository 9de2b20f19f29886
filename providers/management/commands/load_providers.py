"""manage.py load_providers FILE.json [--strict] [--prune-routes] [--allow-origin-change] (docs/contract.md §3).

Keys nothing reads (a typo such as `burst_second`, a top-level `route`) are named on stderr as warnings
with the closest known key, and the rest of the file is loaded ("extra keys allowed"); --strict refuses
such a file instead (exit 1, nothing stored)."""

import json
from pathlib import Path

from django.core.management.base import CommandError

from gateway_site.commands import DatabaseCommand
from providers.services import ProviderConfigError, load_provider_config


class Command(DatabaseCommand):
    help = "Idempotent upsert of providers and routing rules from a JSON file; prints what changed."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--prune-routes", action="store_true", help="Delete routing rules that the file does not list."
        )
        parser.add_argument(
            "--allow-origin-change",
            action="store_true",
            help="Confirm base_url changes to another scheme/host/port (otherwise such a provider stays "
            "disabled until a superuser confirms it in the admin).",
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="Refuse a file with keys nothing reads (unknown or unsupported fields) instead of warning.",
        )

    def handle(self, *args, **options):
        path: Path = options["file"]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CommandError(f"{path}: no such file") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path}: not valid JSON: {exc}") from None
        try:
            report = load_provider_config(
                data,
                prune_routes=options["prune_routes"],
                allow_origin_change=options["allow_origin_change"],
                strict=options["strict"],
            )
        except ProviderConfigError as exc:
            self._warn(path, exc.warnings)
            raise CommandError(f"{path}: nothing was changed; {exc}") from None
        self._warn(path, report.warnings)
        if not report.changed:
            self.stdout.write("no changes")
            return
        for line in report.changes:
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS(f"{len(report.changes)} change(s) applied"))

    def _warn(self, path: Path, warnings: list[str]) -> None:
        for warning in warnings:
            self.stderr.write(self.style.WARNING(f"warning: {path}: {warning}"))
        if warnings:
            self.stderr.write(
                f"{len(warnings)} key(s) of {path} ignored: nothing reads them (--strict refuses such a file)"
            )

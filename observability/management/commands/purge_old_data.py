"""python manage.py purge_old_data [--days N] [--dry-run]  (retention; safe from cron or Celery beat)"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from observability.retention import purge_old_data

log = logging.getLogger("observability.retention")


class Command(BaseCommand):
    help = (
        "Delete the /v1 files past their expires_at (GATEWAY_FILES_EXPIRE_DAYS), rows and stored blobs. "
        "With retention on (--days N, default GATEWAY_RETENTION_DAYS; 0 = off), also, for batches finished "
        "more than N days ago: replace their items' prompts and answers with a purge marker and delete "
        "their /v1 input, output and error files with their blobs (an input file a newer batch also used "
        "is kept). Item status, tokens, batch stats and daily usage are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, default=None, help="override GATEWAY_RETENTION_DAYS (0 = off)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be purged, change nothing"
        )

    def handle(self, *args, days=None, dry_run=False, **options):
        days = settings.GATEWAY_RETENTION_DAYS if days is None else days
        if days < 0:
            raise CommandError("--days: must be >= 0 (0 = retention off)")
        report = purge_old_data(days, dry_run=dry_run)
        verb = "would purge" if dry_run else "purged"
        summary = ", ".join(f"{n} {name}" for name, n in report.purged.items()) or "nothing"
        if report.cutoff is None:
            self.stdout.write(
                f"retention is off (GATEWAY_RETENTION_DAYS=0): no batch data purged; {verb} {summary} "
                "past their expires_at"
            )
        else:
            self.stdout.write(
                f"{verb} {summary} (of batches finished before {report.cutoff.isoformat(timespec='seconds')}; "
                "files also once expired)"
            )
        log.info(
            "retention run",
            extra={
                "event": "retention",
                "dry_run": dry_run,
                "cutoff": report.cutoff.isoformat() if report.cutoff else None,
                **report.purged,
            },
        )

"""python manage.py purge_old_data [--days N] [--dry-run]  (retention; safe from cron or Celery beat)"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from observability.retention import purge_old_data

log = logging.getLogger("observability.retention")


class Command(BaseCommand):
    help = (
        "Delete prompts, responses and uploaded files of batches finished more than N days ago "
        "(default GATEWAY_RETENTION_DAYS); batch stats and usage are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=None, help="override GATEWAY_RETENTION_DAYS")
        parser.add_argument("--dry-run", action="store_true", help="count what would be purged")

    def handle(self, *args, days=None, dry_run=False, **options):
        days = settings.GATEWAY_RETENTION_DAYS if days is None else days
        if days is None or days == 0:
            self.stdout.write("retention is off (GATEWAY_RETENTION_DAYS=0): nothing purged")
            return
        if days < 1:
            raise CommandError("--days: must be >= 1")
        report = purge_old_data(days, dry_run=dry_run)
        verb = "would purge" if dry_run else "purged"
        summary = ", ".join(f"{n} {name}" for name, n in report.purged.items())
        self.stdout.write(f"{verb} {summary} finished before {report.cutoff.isoformat(timespec='seconds')}")
        log.info(
            "retention run",
            extra={
                "event": "retention",
                "dry_run": dry_run,
                "cutoff": report.cutoff.isoformat(),
                **report.purged,
            },
        )

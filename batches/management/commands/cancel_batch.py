"""`python manage.py cancel_batch ID`: what the API's cancel does, for staff without the team's key."""

from __future__ import annotations

import uuid

from django.core.management.base import CommandError

from batches.execution import cancel_batch, cancellable
from batches.models import Batch
from gateway_site.commands import DatabaseCommand


class Command(DatabaseCommand):
    help = (
        "Cancel a batch: its items not sent yet are cancelled, items in flight finish. "
        "Prints the batch's resulting status; a finished batch is left as it is."
    )

    def add_arguments(self, parser):
        parser.add_argument("batch_id", help="The batch id (a UUID, as the API and the dashboard show it).")

    def handle(self, *args, batch_id: str, **options):
        try:
            key = uuid.UUID(batch_id)
        except ValueError:
            raise CommandError(f"no batch has the id {batch_id!r} (a batch id is a UUID)") from None
        before = Batch.objects.filter(pk=key).first()
        if before is None:
            raise CommandError(f"no batch has the id {batch_id!r}")
        was_open = cancellable(before)
        batch = cancel_batch(str(key))
        self.stdout.write(describe(batch, was_open=was_open))


def describe(batch: Batch, *, was_open: bool) -> str:
    if not was_open:
        return f"batch {batch.pk}: {batch.status} (already finished; nothing to cancel)"
    from batches.selectors import item_status_counts

    running = item_status_counts(batch).get("running", 0)
    return (
        f"batch {batch.pk}: {batch.status} ({batch.cancelled_count} of {batch.total_count} items cancelled, "
        f"{running} in flight)"
    )

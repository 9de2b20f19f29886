"""Retention of /v1 files (listed in observability.retention.PURGERS, run by purge_old_data).

Two rules, each deleting the row and its blob in the files storage:

* a file whose ``expires_at`` has passed (GATEWAY_FILES_EXPIRE_DAYS) is deleted, whether or not
  retention (GATEWAY_RETENTION_DAYS) is on;
* with retention on, the input, output and error files of batches finished before the cutoff are
  deleted too (a failed batch — invalid input file — counts from ``failed_at``), except an input file
  that a batch not past the cutoff also used.

The second rule first marks those files expired (one UPDATE), so they are a 404 from then on; then every
expired file goes, CHUNK at a time: its blob is deleted, then its row. A blob the storage fails to
delete keeps its row (still expired, so invisible) for the next run. Safe to run repeatedly and
concurrently (deleting a missing blob or row is a no-op).
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db.models import Q, QuerySet

from .files import file_storage
from .models import File, OpenAIBatch

log = logging.getLogger("observability.retention")

CHUNK = 500


def _batches_past(cutoff: dt.datetime) -> QuerySet[OpenAIBatch]:
    return OpenAIBatch.objects.filter(
        Q(batch__completed_at__lt=cutoff) | Q(batch__isnull=True, failed_at__lt=cutoff)
    )


def files_of_old_batches(cutoff: dt.datetime) -> QuerySet[File]:
    """The input, output and error files of the batches finished before `cutoff`, without the input
    files that a batch not past the cutoff also used."""
    old = _batches_past(cutoff)
    in_use = OpenAIBatch.objects.exclude(pk__in=old.values("pk")).filter(input_file__isnull=False)
    return File.objects.filter(
        Q(pk__in=old.values("input_file"))
        | Q(pk__in=old.values("output_file"))
        | Q(pk__in=old.values("error_file"))
    ).exclude(pk__in=in_use.values("input_file"))


def _expired(now: dt.datetime) -> QuerySet[File]:
    return File.objects.filter(expires_at__lte=now)


def purge_files(cutoff: dt.datetime | None, dry_run: bool, now: dt.datetime) -> int:
    """Delete expired files and (cutoff set) the files of batches finished before it, with their blobs.
    Returns how many files were deleted (or, dry run, would be)."""
    retained = files_of_old_batches(cutoff).exclude(expires_at__lte=now) if cutoff is not None else None
    if dry_run:
        return _expired(now).count() + (retained.count() if retained is not None else 0)
    if retained is not None:
        File.objects.filter(pk__in=retained.values("pk")).update(expires_at=now)
    storage = file_storage()
    total, failed = 0, set()
    while True:
        rows = list(
            _expired(now).exclude(pk__in=failed).order_by("pk").values_list("pk", "storage_name")[:CHUNK]
        )
        if not rows:
            return total
        gone = []
        for pk, name in rows:
            try:
                storage.delete(name)
            except Exception:  # the storage is down or refuses: keep the row for the next run
                log.warning(
                    "could not delete a file's blob", extra={"event": "retention_blob_error", "file": pk}
                )
                failed.add(pk)
            else:
                gone.append(pk)
        File.objects.filter(pk__in=gone).delete()  # SET_NULL on the batches' links; their *_ref stay
        total += len(gone)

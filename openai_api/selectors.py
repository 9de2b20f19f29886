"""Read side of the OpenAI-compatible surface: a team's files and batches, and the OpenAI batch object
computed from the native batch (status, timestamps, request_counts, usage)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from batches.models import Batch, BatchStatus
from teams.models import Team

from .models import File, OpenAIBatch

MAX_LIST_LIMIT = 100
MAX_FILE_LIST_LIMIT = 10_000


def live_files(qs: QuerySet[File], now: dt.datetime | None = None) -> QuerySet[File]:
    """The files of `qs` that have not expired (an expired file is gone for its team: 404, not listed,
    no new batch, not counted in its quotas, until purge_old_data deletes it)."""
    return qs.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now or timezone.now()))


def files_for_team(team: Team, *, purpose: str | None = None, order: str = "desc") -> QuerySet[File]:
    qs = live_files(File.objects.filter(team=team))
    if purpose:
        qs = qs.filter(purpose=purpose)
    return qs.order_by("created_at", "id") if order == "asc" else qs.order_by("-created_at", "-id")


def get_file_for_team(team: Team, file_id: str) -> File:
    """Raises File.DoesNotExist for unknown ids, expired files and other teams' files alike."""
    return live_files(File.objects.filter(team=team)).get(pk=file_id)


def get_batch_for_team(team: Team, batch_id: str) -> OpenAIBatch:
    """Raises OpenAIBatch.DoesNotExist for unknown ids and other teams' batches alike."""
    return OpenAIBatch.objects.select_related("batch", "output_file", "error_file").get(
        team=team, pk=batch_id
    )


def page_after(qs: QuerySet, after: str | None, *, descending: bool = True) -> QuerySet:
    """Keyset page: the rows after the object `after` in (created_at, id) order; unknown ids → no filter."""
    if not after:
        return qs
    anchor = qs.filter(pk=after).values_list("created_at", flat=True).first()
    if anchor is None:
        return qs.none()
    if descending:
        return qs.filter(Q(created_at__lt=anchor) | Q(created_at=anchor, pk__lt=after))
    return qs.filter(Q(created_at__gt=anchor) | Q(created_at=anchor, pk__gt=after))


def list_page(qs: QuerySet, after: str | None, limit: int, *, descending: bool = True) -> tuple[list, bool]:
    rows = list(page_after(qs, after, descending=descending)[: limit + 1])
    return rows[:limit], len(rows) > limit


def batches_for_team(team: Team) -> QuerySet[OpenAIBatch]:
    return OpenAIBatch.objects.filter(team=team).select_related("batch", "output_file", "error_file")


def ts(value: dt.datetime | None) -> int | None:
    return int(value.timestamp()) if value is not None else None


def openai_status(ob: OpenAIBatch) -> str:
    batch: Batch | None = ob.batch
    if batch is None:
        return "failed"
    ended = batch.completed_at is not None and ob.files_written_at is not None
    if batch.status == BatchStatus.CANCELLED:
        return "cancelled" if ended else "cancelling"
    if batch.completed_at is not None:
        if not ended:
            return "finalizing"
        # an all-failed native batch is OpenAI "completed" with request_counts.failed == total
        return "expired" if batch.status == BatchStatus.EXPIRED else "completed"
    return "in_progress"


def file_object(file: File) -> dict[str, Any]:
    return {
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": ts(file.created_at),
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "expires_at": ts(file.expires_at),
        "status_details": None,
    }


def batch_object(ob: OpenAIBatch) -> dict[str, Any]:
    """The OpenAI batch object for `ob` (timestamps in unix seconds)."""
    batch: Batch | None = ob.batch
    status = openai_status(ob)
    ended_at = batch.completed_at if batch is not None else None
    token_usage = ((batch.stats or {}).get("token_usage") if batch is not None else None) or {}
    prompt = int(token_usage.get("prompt_tokens") or 0)
    cached = int(token_usage.get("cached_tokens") or 0)  # of prompt: read from prompt caches (#21)
    completion = int(token_usage.get("completion_tokens") or 0)
    if batch is not None:
        counts = {
            "total": batch.total_count,
            "completed": batch.completed_count,
            "failed": batch.failed_count + batch.cancelled_count + batch.expired_count,
        }
    else:
        counts = {"total": 0, "completed": 0, "failed": 0}
    expires_at = batch.expires_at if batch is not None else None
    return {
        "id": ob.id,
        "object": "batch",
        "endpoint": ob.endpoint,
        "model": None,
        "errors": ob.errors,
        "input_file_id": ob.input_file_ref,
        "completion_window": ob.completion_window,
        "status": status,
        # kept after the files expire (then their content is a 404), as OpenAI shows them
        "output_file_id": ob.output_file_ref or ob.output_file_id,
        "error_file_id": ob.error_file_ref or ob.error_file_id,
        # the native batch's creation time, so that expires_at - created_at is the window exactly
        "created_at": ts(batch.created_at if batch is not None else ob.created_at),
        "in_progress_at": ts(ob.in_progress_at),
        "expires_at": ts(expires_at),
        "finalizing_at": ts(ended_at) if status in ("finalizing", "completed", "expired") else None,
        "completed_at": ts(ob.files_written_at) if status == "completed" else None,
        "failed_at": ts(ob.failed_at),
        "expired_at": ts(ended_at) if status == "expired" else None,
        "cancelling_at": ts(
            ob.cancelling_at or (ended_at if status in ("cancelling", "cancelled") else None)
        ),
        "cancelled_at": ts(ended_at) if status == "cancelled" else None,
        "request_counts": counts,
        "metadata": ob.metadata,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
        "priority": batch.priority if batch is not None else None,
    }


def openai_batch_id(batch: Batch) -> str | None:
    """The ``batch_…`` id of the /v1 batch running this native batch (None: submitted natively)."""
    return OpenAIBatch.objects.filter(batch_id=batch.pk).values_list("id", flat=True).first()

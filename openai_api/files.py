"""Files of the OpenAI-compatible surface (`/v1/files`): the files storage, uploads (checked before and
under the team's lock against its quotas), expiry, each team's usage and deletion. Refusals are
``OpenAIError`` in OpenAI's shape (openai_api/errors.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Count, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from teams.limits import limits_of
from teams.models import Team

from . import selectors
from .conversion import jsonl_format_problem
from .errors import OpenAIError
from .models import File, FilePurpose

UPLOAD_PURPOSES = (FilePurpose.BATCH.value,)


def file_storage() -> Storage:
    return storages["openai_files"]


def upload_file(*, team: Team, upload: UploadedFile, purpose: str) -> File:
    """Store an uploaded file (already streamed to memory or a temp file by Django's upload handlers)
    in the files storage, in chunks. Refused, with nothing stored: a wrong purpose, an empty or too
    large file, a purpose=batch file that is not JSONL (400, param `file`), or an upload that would take
    the team over one of its file quotas (429, `file_quota_exceeded`)."""
    if purpose not in UPLOAD_PURPOSES:
        raise OpenAIError(400, f"purpose must be one of {', '.join(UPLOAD_PURPOSES)}", param="purpose")
    cap = settings.GATEWAY_OPENAI_MAX_FILE_BYTES
    if upload.size > cap:
        raise OpenAIError(413, f"file is {upload.size} bytes; at most {cap} bytes", param="file")
    if upload.size == 0:
        raise OpenAIError(400, "file is empty", param="file")
    check_file_quota(team, upload.size)  # before reading or storing anything; again under the lock below
    if purpose == FilePurpose.BATCH:
        upload.seek(0)
        problem = jsonl_format_problem(upload)
        upload.seek(0)
        if problem is not None:
            raise OpenAIError(400, f"file is not JSONL: {problem}", param="file", code="invalid_file_format")
    filename = (upload.name or "upload.jsonl").rsplit("/", 1)[-1][:255]
    now = timezone.now()
    row = File(
        team=team, purpose=purpose, filename=filename, bytes=upload.size, created_at=now,
        expires_at=file_expiry(now),
    )  # fmt: skip
    storage = file_storage()
    row.storage_name = storage.save(f"{team.pk}/{row.id}", upload)
    try:
        with transaction.atomic():
            # the team's row lock makes concurrent uploads of one team check the quota one after another
            Team.objects.select_for_update().filter(pk=team.pk).values_list("pk", flat=True).first()
            check_file_quota(team, upload.size)
            row.save(force_insert=True)
    except BaseException:
        storage.delete(row.storage_name)
        raise
    return row


def file_expiry(now: dt.datetime) -> dt.datetime | None:
    """When a file made at `now` expires (GATEWAY_FILES_EXPIRE_DAYS; 0 = never: None)."""
    days = int(settings.GATEWAY_FILES_EXPIRE_DAYS)
    return now + dt.timedelta(days=days) if days > 0 else None


@dataclass(frozen=True)
class FileUsage:
    files: int
    max_files: int
    bytes: int
    max_bytes: int


def file_usage(team: Team) -> FileUsage:
    """The team's live (not expired) files, uploads and batch output alike, against its quotas
    (teams/limits.py)."""
    limits = limits_of(team)
    held = selectors.live_files(File.objects.filter(team=team)).aggregate(
        files=Count("pk"), bytes=Coalesce(Sum("bytes"), 0)
    )
    return FileUsage(
        files=int(held["files"]),
        max_files=limits.max_stored_files,
        bytes=int(held["bytes"]),
        max_bytes=limits.max_stored_file_bytes,
    )


def check_file_quota(team: Team, new_bytes: int) -> None:
    """429 if storing one more file of `new_bytes` would take the team over a quota. Not a rate limit:
    it lasts until files are deleted or expire, so no Retry-After and the SDK is told not to retry."""
    u = file_usage(team)
    refusal = None
    if u.files + 1 > u.max_files:
        refusal = (
            "stored_files",
            f"team {team.name!r} holds {u.files} files; its limit is {u.max_files} files",
        )
    elif u.bytes + new_bytes > u.max_bytes:
        refusal = (
            "stored_file_bytes",
            f"team {team.name!r} holds {u.bytes} bytes of files and this file adds {new_bytes}; "
            f"its limit is {u.max_bytes} bytes",
        )
    if refusal is not None:
        limit, message = refusal
        raise OpenAIError(
            429, f"{message}. Delete files (DELETE /v1/files/{{id}}) or wait for them to expire.",
            param=f"limits.{limit}", code="file_quota_exceeded", type="insufficient_quota",
            headers={"x-should-retry": "false"},
        )  # fmt: skip


def delete_file(file: File) -> None:
    name = file.storage_name
    with transaction.atomic():
        file.delete()
        transaction.on_commit(lambda: file_storage().delete(name))

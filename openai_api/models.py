"""Files uploaded through `/v1/files` and the link from an OpenAI-style batch to its native Batch.

Blobs live in the `openai_files` storage (settings.STORAGES): by default the database itself
(``BlobChunk`` rows, openai_api/blob_storage.py), so every web and worker host reads what any other
stored; the local filesystem or any django-storages backend (S3-compatible) by setting. A file expires at
`expires_at` (GATEWAY_FILES_EXPIRE_DAYS after it was made; null = never): from then on it is a 404 and
`purge_old_data` deletes its row and blob (openai_api.retention).
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from batches.models import Batch
from teams.models import Team


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex}"


def new_batch_id() -> str:
    return f"batch_{uuid.uuid4().hex}"


class FilePurpose(models.TextChoices):
    BATCH = "batch"  # uploaded input files
    BATCH_OUTPUT = "batch_output"  # output and error files the gateway writes


class File(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=new_file_id, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="openai_files")
    purpose = models.CharField(max_length=32, choices=FilePurpose.choices)
    filename = models.CharField(max_length=255)
    bytes = models.PositiveBigIntegerField()
    storage_name = models.CharField(max_length=255, help_text="Name of the blob in the openai_files storage.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # null = never; past it the file answers 404 and purge_old_data deletes it with its blob
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="openai_file_team_created"),
            models.Index(fields=["expires_at"], name="openai_file_expires"),
        ]

    def __str__(self) -> str:
        return self.id


class OpenAIBatch(models.Model):
    """An OpenAI batch object. `batch` is the native batch that runs it; None when the input file was
    invalid (OpenAI status `failed`, `errors` set, nothing runs)."""

    id = models.CharField(primary_key=True, max_length=64, default=new_batch_id, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="openai_batches")
    batch = models.OneToOneField(
        Batch, on_delete=models.CASCADE, null=True, blank=True, related_name="openai_batch"
    )
    endpoint = models.CharField(max_length=64)
    input_file = models.ForeignKey(File, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # kept after the input file is deleted (OpenAI keeps showing the id)
    input_file_ref = models.CharField(max_length=64)
    completion_window = models.CharField(max_length=16)
    metadata = models.JSONField(null=True, blank=True)
    # {"object": "list", "data": [{"code", "message", "param", "line"}]} when the input file was invalid
    errors = models.JSONField(null=True, blank=True)
    output_file = models.ForeignKey(File, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    error_file = models.ForeignKey(File, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # the ids shown as output_file_id / error_file_id, kept after those files expire or are purged
    output_file_ref = models.CharField(max_length=64, blank=True, default="")
    error_file_ref = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    in_progress_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    cancelling_at = models.DateTimeField(null=True, blank=True)
    # the output and error files were written (after the native batch ended)
    files_written_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "OpenAI batch"
        indexes = [models.Index(fields=["team", "-created_at", "-id"], name="openai_batch_team_created")]

    def __str__(self) -> str:
        return self.id


class BlobChunk(models.Model):
    """One piece (at most blob_storage.CHUNK_BYTES) of a blob in the database storage
    (openai_api/blob_storage.py): a blob is its chunks by ``seq`` from 0; an empty blob is one empty
    chunk, so that it exists."""

    name = models.CharField(max_length=255)
    seq = models.PositiveIntegerField()
    size = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "seq"], name="openai_blob_chunk_name_seq")]

    def __str__(self) -> str:
        return f"{self.name} #{self.seq} ({self.size} bytes)"

"""Write side of the OpenAI-compatible batches (files: openai_api/files.py): create and cancel batches,
write a finished batch's output and error files. The native batch machinery does the work:
`batches.submission` validates and stores, `batches.execution.cancel_batch` cancels,
`batches.selectors.iter_results` reads the results the files are made of."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from dataclasses import dataclass
from typing import Any

from django.core.files import File as DjangoFile
from django.db import transaction
from django.utils import timezone

from batches import selectors as batch_selectors
from batches.execution import cancel_batch as cancel_native_batch
from batches.models import Batch, BatchStatus
from batches.submission import (
    BatchOptions,
    Idempotency,
    IdempotencyConflict,
    Limits,
    QueueLimitRefused,
    SubmissionError,
    batch_options,
    paused_gc,
    reserved_metadata_errors,
    submit_batch,
    submit_idempotent,
    validate_items,
)
from providers.models import Provider
from providers.selectors import known_route_names
from teams.models import ApiKey, Team

from .conversion import (
    ENDPOINTS,
    InputFileError,
    LineError,
    ParsedFile,
    line_error_from_native,
    read_input,
    split_results,
)
from .errors import OpenAIError
from .files import file_expiry, file_storage
from .models import File, FilePurpose, OpenAIBatch

log = logging.getLogger(__name__)

MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
# the request's own fields (not a line's): a native error naming one is a 400, never a failed batch
REQUEST_FIELDS = frozenset({"priority", "completion_window", "cache", "webhook_url", "provider_batch"})


# --- batches --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchRequest:
    input_file: File
    endpoint: str
    completion_window: Any
    metadata: Any = None
    priority: Any = None
    webhook_url: Any = None
    cache: Any = None
    provider_batch: Any = None


def _check_metadata(metadata: Any) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise OpenAIError(400, "metadata must be an object of string keys and values", param="metadata")
    if len(metadata) > MAX_METADATA_PAIRS:
        raise OpenAIError(400, f"metadata has more than {MAX_METADATA_PAIRS} pairs", param="metadata")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY:
            raise OpenAIError(
                400, f"metadata keys are at most {MAX_METADATA_KEY} characters", param="metadata"
            )
        if not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            raise OpenAIError(
                400,
                f"metadata values are strings of at most {MAX_METADATA_VALUE} characters",
                param="metadata",
            )
    for error in reserved_metadata_errors(metadata):  # gateway-written keys (retry_of, gateway_…)
        raise OpenAIError(400, f"{error.field}: {error.message}", param=error.field, code="invalid_value")
    return metadata


def create_batch_idempotent(
    *, team: Team, api_key: ApiKey | None, request: BatchRequest, key: str | None, body: Any
) -> OpenAIBatch:
    """create_batch at most once per (team, Idempotency-Key): the same key and body return the first batch,
    another body with the same key is a 409 (the native API's rule, ``submit_idempotent``). A file that
    turns out invalid makes a `failed` batch with no native batch: nothing ran, so it is not remembered."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    made: list[OpenAIBatch] = []

    def submit(idempotency: Idempotency | None) -> Batch:
        ob = create_batch(team=team, api_key=api_key, request=request, idempotency=idempotency)
        made.append(ob)
        if ob.batch is None:
            raise _NothingSubmitted(ob)
        return ob.batch

    try:
        batch, _ = submit_idempotent(team=team, key=key, request_hash=digest, submit=submit)
    except _NothingSubmitted as failed:
        return failed.ob
    except IdempotencyConflict:
        raise OpenAIError(
            409, "Idempotency-Key was already used with a different request body", code="idempotency_conflict"
        ) from None
    except SubmissionError as exc:  # a malformed key
        first = exc.errors[0]
        raise OpenAIError(400, f"{first.field}: {first.message}", param=first.field) from None
    return made[0] if made else OpenAIBatch.objects.get(batch=batch)


class _NothingSubmitted(Exception):
    def __init__(self, ob: OpenAIBatch):
        super().__init__(ob.id)
        self.ob = ob


def create_batch(
    *, team: Team, api_key: ApiKey | None, request: BatchRequest, idempotency: Idempotency | None = None
) -> OpenAIBatch:
    """Validate the input file and submit it as a native batch (status in_progress); an invalid file makes
    a `failed` batch with `errors` naming each bad line, and nothing runs. Bad request fields raise
    OpenAIError(400) and store nothing."""
    metadata, options = _checked_request(request)
    common = dict(
        team=team,
        endpoint=request.endpoint,
        input_file=request.input_file,
        input_file_ref=request.input_file.id,
        completion_window=request.completion_window,
        metadata=metadata,
    )
    try:
        with paused_gc():
            parsed = _read_input_file(request.input_file, request.endpoint)
        if parsed.errors:
            raise InputFileError(parsed.errors + _native_errors(parsed))
        return _store_batch(
            team=team,
            api_key=api_key,
            parsed=parsed,
            metadata=metadata,
            options=options,
            idempotency=idempotency,
            common=common,
        )
    except InputFileError as exc:
        errors = exc.errors
    except QueueLimitRefused as exc:  # the team's queue is full: refused now, nothing stored
        raise _queue_full_error(exc) from None
    except SubmissionError as exc:
        _raise_request_error(exc)
        errors = _submission_line_errors(exc, parsed)
    errors.sort(key=lambda e: (e.line is None, e.line or 0))
    return OpenAIBatch.objects.create(
        errors={"object": "list", "data": [e.as_dict() for e in errors]}, failed_at=timezone.now(), **common
    )


def _checked_request(request: BatchRequest) -> tuple[dict[str, str] | None, BatchOptions]:
    """The request's checked metadata and native batch options; a bad field raises OpenAIError(400)."""
    if request.endpoint not in ENDPOINTS:
        raise OpenAIError(
            400, f"endpoint must be one of {', '.join(ENDPOINTS)}", param="endpoint", code="invalid_value"
        )
    if request.input_file.purpose != FilePurpose.BATCH:
        raise OpenAIError(
            400, "input_file_id must name a file uploaded with purpose 'batch'", param="input_file_id"
        )
    if request.completion_window in (None, ""):
        raise OpenAIError(
            400, "completion_window is required (e.g. '24h', '1h', '15m')", param="completion_window"
        )
    metadata = _check_metadata(request.metadata)
    try:
        options = batch_options(
            request.priority,
            request.completion_window,
            cache=request.cache,
            webhook_url=request.webhook_url,
            provider_batch=request.provider_batch,
        )
    except SubmissionError as exc:
        first = exc.errors[0]
        raise OpenAIError(
            400, f"{first.field}: {first.message}", param=first.field, code="invalid_value"
        ) from None
    return metadata, options


def _store_batch(
    *,
    team: Team,
    api_key: ApiKey | None,
    parsed: ParsedFile,
    metadata: dict[str, str] | None,
    options: BatchOptions,
    idempotency: Idempotency | None,
    common: dict[str, Any],
) -> OpenAIBatch:
    """Submit the parsed items as a native batch and its OpenAI batch, in one transaction."""
    with transaction.atomic():
        batch = submit_batch(
            team=team,
            items=parsed.items,
            metadata=metadata or {},
            api_key=api_key,
            item_sizes=parsed.sizes,
            options=options,
            idempotency=idempotency,
        )
        return OpenAIBatch.objects.create(
            id=f"batch_{batch.id.hex}", batch=batch, in_progress_at=batch.created_at, **common
        )


def _queue_full_error(exc: QueueLimitRefused) -> OpenAIError:
    """The 429 for a team whose queue is full."""
    return OpenAIError(
        429,
        exc.message,
        param=f"limits.{exc.limit}",
        code="queue_limit_exceeded",
        type="rate_limit_error",
        headers=exc.headers,
    )


def _submission_line_errors(exc: SubmissionError, parsed: ParsedFile) -> list[LineError]:
    """The native submission's errors as the input file's line errors."""
    return [
        line_error_from_native(
            e.index, e.field, e.message, parsed.lines, items=parsed.items, model_names=parsed.model_names
        )
        for e in exc.errors
    ]


def _raise_request_error(exc: SubmissionError) -> None:
    """A native error about the request itself (e.g. ``provider_batch: "always"`` that a reachable
    provider cannot serve): 400 naming the field; the transaction rolled back, nothing is stored."""
    for error in exc.errors:
        if error.index is None and error.field in REQUEST_FIELDS:
            raise OpenAIError(
                400, f"{error.field}: {error.message}", param=error.field, code="invalid_value"
            ) from None


def _native_errors(parsed: ParsedFile) -> list[LineError]:
    """What the native validator finds in the lines that passed the line checks (so that one answer
    lists every problem)."""
    items, sizes, lines = parsed.good()
    if not items:
        return []
    try:
        with paused_gc():
            validate_items(items, sizes)
    except SubmissionError as exc:
        return [
            line_error_from_native(
                e.index, e.field, e.message, lines, items=items, model_names=parsed.model_names
            )
            for e in exc.errors
        ]
    return []


def _read_input_file(file: File, endpoint: str):
    limits = Limits.from_settings()
    with file_storage().open(file.storage_name, "rb") as stream:
        return read_input(
            stream,
            endpoint=endpoint,
            max_items=limits.max_items,
            max_item_bytes=limits.max_item_bytes,
            routes=known_route_names(),
            providers=Provider.objects.values_list("name", flat=True),
        )


CANCELLABLE = (BatchStatus.QUEUED, BatchStatus.RUNNING, BatchStatus.CANCELLED)


def cancel_batch(ob: OpenAIBatch) -> OpenAIBatch:
    """OpenAI cancel: `cancelling` until in-flight items finish, then `cancelled`. Items not sent yet are
    cancelled (each gets an error-file line). A batch that already ended is a 409."""
    batch = ob.batch
    if batch is None or batch.status not in CANCELLABLE:
        status = "failed" if batch is None else batch.status
        raise OpenAIError(
            409, f"cannot cancel a batch whose status is {status}", code="batch_not_cancellable"
        )
    OpenAIBatch.objects.filter(pk=ob.pk, cancelling_at__isnull=True).update(cancelling_at=timezone.now())
    cancel_native_batch(str(batch.id))
    ob.refresh_from_db()
    return refresh_batch(ob)


# --- output and error files -------------------------------------------------------------------------


def refresh_batch(ob: OpenAIBatch) -> OpenAIBatch:
    """Write the output and error files once the native batch has ended (first read after the end)."""
    batch = ob.batch
    if batch is None or ob.files_written_at is not None:
        return ob
    batch.refresh_from_db()
    if batch.completed_at is None:
        return ob
    write_result_files(ob.pk)
    fresh = OpenAIBatch.objects.select_related("batch", "output_file", "error_file").get(pk=ob.pk)
    return fresh


def write_result_files(ob_id: str) -> None:
    """Stream the native RESULTs into an output file (succeeded) and an error file (everything else);
    exactly once per batch (row lock), each file only if it has lines."""
    with transaction.atomic():
        ob = OpenAIBatch.objects.select_for_update().get(pk=ob_id)
        if ob.files_written_at is not None:
            return
        batch: Batch = ob.batch
        storage = file_storage()
        saved: list[str] = []
        try:
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                sizes = {True: 0, False: 0}
                for ok, line in split_results(batch_selectors.iter_results(batch), ob.id, ob.endpoint):
                    (out if ok else err).write(line)
                    sizes[ok] += len(line)
                files = {}
                for ok, tmp, suffix in ((True, out, "output"), (False, err, "error")):
                    if not sizes[ok]:
                        continue
                    tmp.seek(0)
                    now = timezone.now()
                    row = File(
                        team_id=ob.team_id,
                        purpose=FilePurpose.BATCH_OUTPUT,
                        filename=f"{ob.id}_{suffix}.jsonl",
                        bytes=sizes[ok],
                        created_at=now,
                        expires_at=file_expiry(now),
                    )
                    row.storage_name = storage.save(
                        f"{ob.team_id}/{row.id}", DjangoFile(tmp, name=row.filename)
                    )
                    saved.append(row.storage_name)
                    row.save(force_insert=True)
                    files[ok] = row
            ob.output_file = files.get(True)
            ob.error_file = files.get(False)
            ob.output_file_ref = ob.output_file.id if ob.output_file else ""
            ob.error_file_ref = ob.error_file.id if ob.error_file else ""
            ob.files_written_at = timezone.now()
            ob.save(
                update_fields=[
                    "output_file",
                    "error_file",
                    "output_file_ref",
                    "error_file_ref",
                    "files_written_at",
                ]
            )
        except BaseException:
            for name in saved:
                storage.delete(name)
            raise

"""Idempotency-Key: one batch per (team, key); the same request again gets that batch back, another
request with the key is a 409 (``IdempotencyConflict``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.db import IntegrityError

from teams.models import Team

from ..models import Batch
from .errors import IdempotencyConflict, body_error
from .parsing import media_type_of

IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")  # visible ASCII, no spaces


@dataclass(frozen=True)
class Idempotency:
    key: str
    request_hash: str


def request_hash(body: bytes, content_type: str | None, query: Mapping[str, str] | None = None) -> str:
    """SHA-256 over what decides the batch: the media type, the JSONL options and the body bytes."""
    digest = hashlib.sha256()
    digest.update(media_type_of(content_type).encode() + b"\n")
    for name in ("priority", "completion_window", "cache", "webhook_url", "provider_batch"):
        digest.update(f"{name}={(query or {}).get(name) or ''}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def submit_idempotent(
    *, team: Team, key: str | None, request_hash: str, submit: Callable[[Idempotency | None], Batch]
) -> tuple[Batch, bool]:
    """Run ``submit`` at most once per (team, Idempotency-Key). Returns (batch, created).

    No key: ``submit(None)``. A key seen before with the same request hash: the first batch, not
    created again (whatever it became since). With another hash: IdempotencyConflict. Two requests
    racing with one key: the unique constraint lets one insert; the other gets its batch (or the 409).
    A bad key is a SubmissionError naming the header. Callers: POST /api/v1/batches and any other
    submission endpoint (``submit`` wraps submit_body / submit_batch with its own arguments)."""
    if key is None or key == "":
        return submit(None), True
    if not IDEMPOTENCY_KEY_RE.match(key):
        raise body_error(400, "Idempotency-Key", "must be 1-255 visible ASCII characters (no spaces)")
    existing = _batch_for_key(team, key, request_hash)
    if existing is not None:
        return existing, False
    try:
        return submit(Idempotency(key, request_hash)), True
    except IntegrityError:
        existing = _batch_for_key(team, key, request_hash)
        if existing is None:
            raise
        return existing, False


def _batch_for_key(team: Team, key: str, request_hash: str) -> Batch | None:
    batch = Batch.objects.filter(team=team, idempotency_key=key).first()
    if batch is not None and batch.request_hash != request_hash:
        raise IdempotencyConflict(batch)
    return batch

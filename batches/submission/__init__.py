"""Batch submission: parse a JSON or JSONL body, validate every item, store the batch in one transaction.

Validation is hand-written (not DRF serializers): it runs once per item for batches of up to
GATEWAY_MAX_ITEMS_PER_BATCH items, and a DRF serializer costs ~3x more per item while checking
less (measured by bench/ingest.py, see docs/benchmarks.md). Every item is checked before anything
is stored; on any error a SubmissionError carries the HTTP status and a list of field-level
errors, and no row is written.

One job per module:

* ``parsing``      the body (JSON document or JSONL lines), bounded before and while parsing
* ``options``      priority, completion_window and webhook_url → ``BatchOptions``
* ``webhook_url``  where a webhook may be sent (https, no private/loopback/metadata address)
* ``metadata``     the batch's metadata (size, JSON-storable, no gateway-written keys)
* ``validation``   the items, purely: the item-shape rule (gateway_engine.item_shape) + submission's
  limits against ``KnownTargets`` (``targets``) passed in; ``messages`` checks an item's messages
* ``idempotency``  Idempotency-Key: one batch per (team, key)
* ``storage``      COPY (PostgreSQL) or bulk_create, each item with its queue (preferred provider)
* ``enqueue``      ``start_batch`` once the transaction has committed
* ``service``      ``submit_batch`` / ``submit_body``: ties the above together, reads the database
* ``errors``, ``caps``, ``json_values``  the errors raised, the size caps, small JSON-value checks

The names other modules call are importable from here.
"""

from __future__ import annotations

from .caps import MAX_CUSTOM_ID_CHARS, MAX_NAME_CHARS, Limits
from .errors import (
    BudgetRefused,
    FieldError,
    IdempotencyConflict,
    QueueLimitRefused,
    SubmissionError,
)
from .idempotency import Idempotency, request_hash, submit_idempotent
from .messages import ROLES
from .metadata import reserved_metadata_errors
from .options import BatchOptions, batch_options
from .parsing import ParsedBody, check_body_size, parse_body, parse_jsonl
from .service import check_budget, submit_batch, submit_body, validate_items
from .validation import ValidItem, paused_gc

__all__ = [
    "MAX_CUSTOM_ID_CHARS",
    "MAX_NAME_CHARS",
    "ROLES",
    "BatchOptions",
    "BudgetRefused",
    "FieldError",
    "Idempotency",
    "IdempotencyConflict",
    "Limits",
    "ParsedBody",
    "QueueLimitRefused",
    "SubmissionError",
    "ValidItem",
    "batch_options",
    "check_body_size",
    "check_budget",
    "paused_gc",
    "parse_body",
    "parse_jsonl",
    "reserved_metadata_errors",
    "request_hash",
    "submit_batch",
    "submit_body",
    "submit_idempotent",
    "validate_items",
]

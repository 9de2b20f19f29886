"""Writing a validated batch's items: PostgreSQL COPY (psycopg 3) or, on other databases,
bulk_create in large chunks, each item with its scheduler queue (the preferred provider) and its prompt-prefix
group (batches.scheduling.prefix.prefix_key; an embeddings item has none) and its endpoint (chat, or
embeddings with its ``input`` in the payload)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.db import connection
from django.utils import timezone

from batches.scheduling.prefix import prefix_keyer
from gateway_engine.routing import RoutingTable, draw_free_preference, preferred_provider

from ..models import Batch, BatchItem, ItemStatus
from .json_values import ENCODER
from .options import BatchOptions
from .provider_batch import path_chooser
from .validation import ValidItem

COPY_COLUMNS = (
    "batch_id",
    "seq",
    "custom_id",
    "route",
    "requested_provider",
    "queue_provider",
    "prefix_key",
    "served_via",
    "payload",
    "status",
    "provider",
    "attempts",
    "error_type",
    "error_message",
    "retry_extra_tokens",
    "attempt_log",
    "claimed_by",
    "created_at",
    "pipeline",
    "endpoint",
    "target",
)
SQLITE_CHUNK = 5000


def insert_items(
    batch: Batch, valid: Iterable[ValidItem], table: RoutingTable, options: BatchOptions | None = None
) -> None:
    """Store the items of ``batch`` (inside the caller's transaction), queued as ``table`` routes them,
    each on the path its provider and the batch's ``provider_batch`` option give it (``served_via``)."""
    queue = queue_namer(str(batch.id), table)
    path = path_chooser(options or BatchOptions(), table)
    if connection.vendor == "postgresql":
        _copy_items(batch, valid, queue, path)
    else:
        _bulk_create_items(batch, valid, queue, path)


def queue_namer(batch_id: str, table: RoutingTable) -> Callable[[ValidItem], str]:
    """The scheduler's queue of an item (``BatchItem.queue_provider``): its preferred provider, drawn
    exactly as the engine will (``routing.preferred_provider``, salt = batch id, key = custom_id), or
    "" when unroutable now. Routes whose first choice does not depend on the draw are resolved once."""
    fixed: dict[tuple[str, str], str | None] = {}

    def name(v: ValidItem) -> str:
        key = (v.route, v.provider)
        if key not in fixed:
            fixed[key] = draw_free_preference(table, route=v.route, provider=v.provider)
        known = fixed[key]
        if known is not None:
            return known
        return preferred_provider(table, route=v.route, provider=v.provider, salt=batch_id, key=v.custom_id)

    return name


def _copy_items(
    batch: Batch,
    valid: Iterable[ValidItem],
    queue: Callable[[ValidItem], str],
    path: Callable[[str, str], str],
) -> None:
    table = connection.ops.quote_name(BatchItem._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in COPY_COLUMNS)
    now = timezone.now()
    pending = ItemStatus.PENDING.value
    batch_id = batch.id
    prefix = prefix_keyer()
    with connection.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for v in valid:
                q = queue(v)
                copy.write_row(
                    (batch_id, v.seq, v.custom_id, v.route, v.provider, q, prefix(v.payload), path(q, v.endpoint), v.payload_json, pending,
                     "", 0, "", "", 0, "[]", "", now, _json(v.pipeline), v.endpoint, v.target)
                )  # fmt: skip


def _json(value: object) -> str | None:
    """A JSON column's COPY text (None: SQL NULL)."""
    return None if value is None else ENCODER.encode(value)


def _bulk_create_items(
    batch: Batch,
    valid: Iterable[ValidItem],
    queue: Callable[[ValidItem], str],
    path: Callable[[str, str], str],
) -> None:
    prefix = prefix_keyer()
    rows = [
        BatchItem(
            served_via=path(queue(v), v.endpoint),
            batch=batch,
            seq=v.seq,
            custom_id=v.custom_id,
            route=v.route,
            requested_provider=v.provider,
            queue_provider=queue(v),
            prefix_key=prefix(v.payload),
            payload=v.payload,
            pipeline=v.pipeline,
            endpoint=v.endpoint,
            target=v.target,
            status=ItemStatus.PENDING,
        )
        for v in valid
    ]
    BatchItem.objects.bulk_create(rows, batch_size=SQLITE_CHUNK)

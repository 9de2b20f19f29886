"""Items bound for a provider's batch API → provider batches (chunks) within the provider's limits.

An item's provider is its queue (``BatchItem.queue_provider``: the route's priority/weight draw made at
submission, ``routing.preferred_provider``). Per gateway batch and provider, pending items with
``served_via=provider_batch`` are taken (``FOR UPDATE SKIP LOCKED``) in seq order and cut into chunks of
at most ``batch_max_requests`` lines and ``batch_max_bytes`` bytes (each line measured as the client
will upload it, ``encode_line``), and, where the provider sets ``batch_max_enqueued_tokens`` (the
account's enqueued-token limit: input tokens of every open provider batch together), at most the
room left under it: each line counts its estimated input tokens (``estimate_split``, as the engine
estimates them), held while its chunk is open (``ProviderBatch.enqueued_tokens``). Items beyond it stay
pending and wait for the next provider batch: a provider at its limit (one open chunk or more) is not
grouped again until its open chunks are done; with nothing enqueued a chunk takes at least one item.
Each chunk's row (its intent: chunk id, provider, item ids, time) is
stored in the SAME transaction as its items' claims (``claimed_by=pb:<chunk>``), due at once — so a
crash anywhere leaves either free items or a chunk that the due work resumes, never both.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from batches.execution.claims import ACTIVE_BATCH_STATUSES
from batches.models import Batch, BatchItem, ItemStatus, ServedVia
from gateway_engine.batch_api import BatchLine
from gateway_engine.endpoints import EMBEDDINGS
from gateway_engine.items import estimate_split
from gateway_engine.routing import ProviderConfig
from providers.models import Provider

from . import remote
from .lines import batch_line
from .models import OPEN_STATES, ProviderBatch, new_chunk_id

log = logging.getLogger("provider_batches")

# a chunk's items are held by its claim until the chunk is done (each poll renews it)
CLAIM_HOLD = dt.timedelta(days=30)
MAX_ITEMS_PER_PASS = 200_000


@dataclass
class Chunk:
    id: str
    provider: ProviderConfig
    items: list[BatchItem] = field(default_factory=list)
    bytes: int = 0
    tokens: int = 0  # estimated input tokens of its lines (the enqueued-token limit counts them)


def enqueued_tokens() -> dict[str, int]:
    """Per provider, the estimated input tokens held by its open provider batches (one GROUP BY)."""
    rows = (
        ProviderBatch.objects.filter(state__in=OPEN_STATES)
        .values("provider")
        .annotate(n=Sum("enqueued_tokens"))
    )
    return {row["provider"]: int(row["n"] or 0) for row in rows.order_by()}


def providers_at_limit() -> set[str]:
    """Providers with an enqueued-token limit and an open provider batch: their waiting items wait for
    it to end (grouping them now would find no room, or cut a sliver)."""
    limited = set(
        Provider.objects.filter(batch_max_enqueued_tokens__isnull=False).values_list("name", flat=True)
    )
    if not limited:
        return set()
    open_ = ProviderBatch.objects.filter(state__in=OPEN_STATES, provider__in=limited)
    return set(open_.values_list("provider", flat=True).distinct())


def item_tokens(config: ProviderConfig, item: BatchItem) -> int:
    """The input tokens one line holds against the enqueued-token limit (the engine's estimate)."""
    payload = item.payload or {}
    embedding_input = payload.get("input") if item.endpoint == EMBEDDINGS else None
    return estimate_split(
        payload.get("messages") or [],
        payload.get("params") or {},
        config.default_max_tokens,
        embedding_input=embedding_input,
    )[0]


def _waiting():
    """Items bound for a provider batch, not in one yet, whose provider is not at its enqueued limit."""
    return BatchItem.objects.filter(
        status=ItemStatus.PENDING,
        served_via=ServedVia.PROVIDER_BATCH,
        batch__status__in=ACTIVE_BATCH_STATUSES,
        batch__completed_at__isnull=True,
    ).exclude(queue_provider__in=providers_at_limit())


def batches_to_group(limit: int = 20) -> list[str]:
    """Unfinished batches with items bound for a provider batch and not yet in one."""
    ids = _waiting().order_by().values_list("batch_id", flat=True).distinct()[:limit]
    return [str(i) for i in ids]


def next_group_due() -> dt.datetime | None:
    """Now, when some item waits to be grouped (one indexed EXISTS) and its provider has room."""
    return timezone.now() if _waiting().exists() else None


def group_batch(batch_id: str) -> list[ProviderBatch]:
    """Cut one batch's waiting items into chunks and store them (intent rows + claims) in one
    transaction. Items whose provider has no batch API any more go back to real time."""
    providers = remote.provider_configs()
    with transaction.atomic():
        items = list(
            BatchItem.objects.filter(
                batch_id=batch_id, status=ItemStatus.PENDING, served_via=ServedVia.PROVIDER_BATCH
            )
            .order_by("seq")
            .select_for_update(skip_locked=True, of=("self",))
            .only("id", "batch_id", "seq", "custom_id", "queue_provider", "payload", "endpoint")[
                :MAX_ITEMS_PER_PASS
            ]
        )
        if not items:
            return []
        by_provider: dict[tuple[str, str], list[BatchItem]] = {}  # one provider batch holds one endpoint
        for item in items:
            by_provider.setdefault((item.queue_provider, item.endpoint), []).append(item)
        chunks: list[Chunk] = []
        orphans: list[int] = []
        held = enqueued_tokens()
        for (name, _endpoint), group in by_provider.items():
            config = providers.get(name)
            if config is None or config.batch is None or not config.enabled:
                orphans += [i.id for i in group]
                continue
            chunks += list(cut(config, group, held.get(name, 0)))
        rows = [_store(batch_id, c) for c in chunks]
        log.info(
            "batch %s: %d items grouped into %d provider batches",
            batch_id,
            sum(len(c.items) for c in chunks),
            len(rows),
        )
        if orphans:
            BatchItem.objects.filter(id__in=orphans).update(served_via=ServedVia.REALTIME)
            log.warning(
                "batch %s: %d items' providers have no batch API now: sent in real time",
                batch_id,
                len(orphans),
            )
    if orphans:
        remote.wake_dispatchers()
    return rows


def cut(config: ProviderConfig, items: list[BatchItem], enqueued: int = 0) -> Iterator[Chunk]:
    """Chunks of at most max_requests lines and max_bytes bytes (a line alone larger than max_bytes
    still gets a chunk of its own: the provider refuses it and the item goes to real time), within
    the room ``max_enqueued_tokens`` leaves beside the ``enqueued`` tokens of the provider's open
    batches: the items past it are left out (they stay pending). With nothing enqueued the first item
    is taken whatever its size (else it could never go)."""
    assert config.batch is not None
    encode = remote.line_encoder(config)
    limit = config.batch.max_enqueued_tokens
    chunk = Chunk(new_chunk_id(), config)
    for item in items:
        tokens = item_tokens(config, item)
        if limit is not None and enqueued + tokens > limit and (enqueued or chunk.items):
            break  # the rest waits for the next provider batch
        enqueued += tokens
        size = len(encode(_line_for(chunk, len(chunk.items), config, item)))
        full = len(chunk.items) >= config.batch.max_requests or chunk.bytes + size > config.batch.max_bytes
        if chunk.items and full:
            yield chunk
            chunk = Chunk(new_chunk_id(), config)
            size = len(encode(_line_for(chunk, 0, config, item)))
        chunk.items.append(item)
        chunk.bytes += size
        chunk.tokens += tokens
    if chunk.items:
        yield chunk


def _line_for(chunk: Chunk, n: int, config: ProviderConfig, item: BatchItem) -> BatchLine:
    return batch_line(f"{chunk.id}-{n}", config, item.payload, item.endpoint)


def _store(batch_id: str, chunk: Chunk) -> ProviderBatch:
    now = timezone.now()
    row = ProviderBatch.objects.create(
        id=chunk.id,
        batch_id=batch_id,
        provider=chunk.provider.name,
        kind=chunk.provider.kind,
        item_ids=[i.id for i in chunk.items],
        line_count=len(chunk.items),
        input_bytes=chunk.bytes,
        enqueued_tokens=chunk.tokens,
        due_at=now,
    )
    ids = [i.id for i in chunk.items]
    BatchItem.objects.filter(id__in=ids).update(
        status=ItemStatus.RUNNING, claimed_by=row.owner, claim_expires_at=now + CLAIM_HOLD
    )
    BatchItem.objects.filter(id__in=ids, started_at__isnull=True).update(started_at=now)
    Batch.objects.filter(id=batch_id, started_at__isnull=True).update(started_at=now)
    return row

"""Claims: who sends which item. An item is claimed atomically (``SELECT … FOR UPDATE SKIP LOCKED``, then
``status=running, claimed_by=<worker>, claim_expires_at=now+lease``); a claim is renewed while its
worker lives, released at once (back to ``pending``) when the worker stops without sending it, and a
dead worker's claims go back to ``pending`` once their lease has run out (``requeue_expired_claims``).
Pending items of a cancelled or overdue batch are ended in bulk here, without a worker touching each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Case, F, IntegerField, Q, Value, When
from django.utils import timezone

from batches import signals
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus, ServedVia
from gateway_engine import ItemResult
from gateway_engine.endpoints import EMBEDDINGS, ENDPOINTS, WIRE_FAMILY
from gateway_engine.retry import ErrorType

from . import journal
from .common import claim_lease

CLAIM_FIELDS = (
    "id",
    "batch_id",
    "seq",
    "custom_id",
    "route",
    "requested_provider",
    "queue_provider",
    "moved_from",  # engine_wiring.work_item: a moved item is sent to its new queue's provider first
    "prefix_key",
    "payload",
    "retry_state",
    "started_at",
    "endpoint",  # engine_wiring.work_item reads it: a deferred field would cost a SELECT per item
    "step_index",
)
ACTIVE_BATCH_STATUSES = (BatchStatus.QUEUED, BatchStatus.RUNNING)
# real-time claims take only items on the real-time path: an item bound for its provider's batch API
# (``served_via=provider_batch``) is the provider-batch route's (provider_batches) until it sets it back
REALTIME_PATH = Q(served_via=ServedVia.REALTIME)


@dataclass(frozen=True)
class Move:
    """A capacity move's claim: ``provider`` serves items of the held-back ``peer``'s queue."""

    provider: str
    peer: str
    routes: tuple[str, ...]  # the routes both are in the first priority tier of
    waited_since: datetime | None  # only items submitted by then (None: any, the peer is paused)
    embeddings: bool  # ``provider`` serves embeddings items


def queue_filter(provider: str, known: Sequence[str] | None = None) -> Q:
    """Items of one provider queue. The unrouted queue ("") also takes items queued for a provider
    that no longer exists (``known``: every provider name), so nothing is stranded."""
    if provider == "" and known is not None:
        return ~Q(queue_provider__in=[k for k in known if k])
    return Q(queue_provider=provider)


def claim_queued(
    provider: str,
    batch_ids: Sequence[str],
    limit: int,
    owner: str,
    known: Sequence[str] | None = None,
    prefix: str | None = None,
) -> list[BatchItem]:
    """Take up to ``limit`` pending items queued for ``provider``, from the batches in the given order
    (the scheduler's order), lowest seq first inside a batch. One short transaction per batch tried.

    ``prefix`` not None (prefix grouping, batches.scheduling.prefix): inside each batch, whole prefix
    groups — first the pending items of key ``prefix`` (the group the dispatcher is sending), then the
    group of the lowest pending seq, and so on (keyless items, "", in seq order as one run) — which of
    the batch's items, never how many or from which batch."""
    _check_owner(owner)
    where = queue_filter(provider, known)
    taken: list[BatchItem] = []
    for batch_id in batch_ids:
        if len(taken) >= limit:
            break
        now = timezone.now()
        with transaction.atomic():
            pending = BatchItem.objects.filter(
                where, REALTIME_PATH, batch_id=batch_id, status=ItemStatus.PENDING
            )
            if prefix is None:
                items = _lock(pending, limit - len(taken))
            else:
                running = BatchItem.objects.filter(where, batch_id=batch_id, status=ItemStatus.RUNNING)
                items = _claim_groups(pending, running, limit - len(taken), prefix)
            _mark_claimed(items, owner, now)
        taken += items
    return taken


def claim_moved(move: Move, batch_ids: Sequence[str], limit: int, owner: str) -> list[BatchItem]:
    """Take up to ``limit`` pending items of the held-back ``move.peer``'s queue for ``move.provider``
    (a capacity move, batches.execution.capacity): only items of the routes both share a first tier in,
    without an explicit provider, submitted at or before ``move.waited_since`` (None: any), and no
    embeddings items unless ``move.embeddings``. The rows claimed are queued for ``move.provider`` from
    now on (``queue_provider``) with ``moved_from`` naming the peer; batches in the given order."""
    _check_owner(owner)
    where = queue_filter(move.peer) & Q(route__in=move.routes, requested_provider="")
    if move.waited_since is not None:
        where &= Q(created_at__lte=move.waited_since)
    if not move.embeddings:
        where &= ~Q(endpoint__in=[e for e in ENDPOINTS if WIRE_FAMILY[e] == EMBEDDINGS])
    taken: list[BatchItem] = []
    for batch_id in batch_ids:
        if len(taken) >= limit:
            break
        with transaction.atomic():
            pending = BatchItem.objects.filter(
                where, REALTIME_PATH, batch_id=batch_id, status=ItemStatus.PENDING
            )
            items = _lock(pending, limit - len(taken))
            _mark_claimed(items, owner, timezone.now())
            if items:
                BatchItem.objects.filter(id__in=[i.id for i in items]).update(
                    queue_provider=move.provider, moved_from=move.peer
                )
            for item in items:
                item.queue_provider, item.moved_from = move.provider, move.peer
        taken += items
    return taken


def _lock(qs, limit: int) -> list[BatchItem]:
    """Up to ``limit`` rows of ``qs``, lowest seq first, locked (rows another claim holds are skipped)."""
    return list(
        qs.order_by("seq").select_for_update(skip_locked=True, of=("self",)).only(*CLAIM_FIELDS)[:limit]
    )


def _claim_groups(pending, running, limit: int, current: str) -> list[BatchItem]:
    """Whole prefix groups of one batch's pending items (see ``claim_queued``): ``current``'s first,
    then the groups another dispatcher is sending (their items running: the dispatchers converge on the
    groups in flight instead of each opening one), then the groups of the lowest pending seqs.

    At most four statements whatever the number of groups: the keys in that order (the keys in flight,
    then two unlocked reads of at most ``limit`` rows each), then one locking read of their rows
    ordered by key rank, then seq. (It
    was two or three statements per group, each excluding the rows and keys taken so far: with a
    distinct prompt per item, one group per item, this was most of PostgreSQL's time on the batch path,
    docs/benchmarks.md.) Rows another claim holds are skipped, so a locked group is passed over."""
    keys: dict[str, None] = {current: None} if current else {}  # in rank order
    in_flight = list(running.exclude(prefix_key="").values_list("prefix_key", flat=True).distinct())
    # no keyed group in flight (keyless items: a prompt of one message): no lookup, which found nothing
    # by reading every pending row of the batch
    sources = [pending.filter(prefix_key__in=in_flight)] if in_flight else []
    for source in [*sources, pending]:
        keys.update(dict.fromkeys(source.order_by("seq").values_list("prefix_key", flat=True)[:limit]))
    if not keys:
        return []
    rows = pending.filter(prefix_key__in=list(keys)).select_for_update(skip_locked=True, of=("self",))
    if len(keys) == 1:  # one group (a prompt every item shares): its index gives the seq order
        return list(rows.order_by("seq").only(*CLAIM_FIELDS)[:limit])
    rank = Case(*(When(prefix_key=k, then=Value(i)) for i, k in enumerate(keys)), output_field=IntegerField())
    return list(rows.order_by(rank, "seq").only(*CLAIM_FIELDS)[:limit])


def _check_owner(owner: str) -> None:
    """Every claim names its slice: an empty owner would match every released row."""
    if not owner:
        raise ValueError("a claim needs an owner (batches.execution.common.new_owner())")


def _mark_claimed(items: list[BatchItem], owner: str, now) -> None:
    if not items:
        return
    ids = [i.id for i in items]
    BatchItem.objects.filter(id__in=ids).update(
        status=ItemStatus.RUNNING, claimed_by=owner, claim_expires_at=now + claim_lease()
    )
    BatchItem.objects.filter(id__in=ids, started_at__isnull=True).update(started_at=now)


def renew_claims(owner: str) -> int:
    """Push the lease of all ``owner``'s claims forward."""
    _check_owner(owner)
    qs = BatchItem.objects.filter(claimed_by=owner, status=ItemStatus.RUNNING)
    return qs.update(claim_expires_at=timezone.now() + claim_lease())


def release_claims(owner: str, ids: Iterable[int] | None = None) -> int:
    """Give ``owner``'s claims back at once (pending again, claimable by anyone). Only that slice's:
    another slice of the same process keeps what it has in flight. An item given back after it was
    sent (the slice stopped on an error before storing the answer) keeps its journalled attempts."""
    _check_owner(owner)
    with transaction.atomic():
        qs = BatchItem.objects.filter(claimed_by=owner, status=ItemStatus.RUNNING)
        if ids is not None:
            qs = qs.filter(id__in=list(ids))
        rows = list(qs.select_for_update().values_list("id", "batch_id", "custom_id"))
        if not rows:
            return 0
        journal.fold_unknown([(i, owner, str(b), c) for i, b, c in rows], journal.RELEASED)
        return BatchItem.objects.filter(id__in=[r[0] for r in rows]).update(
            status=ItemStatus.PENDING, claimed_by="", claim_expires_at=None
        )


def carry_retry_state(owner: str, released: Iterable[tuple[BatchItem, ItemResult]]) -> int:
    """Keep, on items given back while they waited out a breaker or a backoff, what their claim spent
    (``ItemResult.retry_state``: attempts per provider, seconds waited for breakers) for their next
    claim. Only rows ``owner`` still claims; call before ``release_claims`` gives them back."""
    n = 0
    for row, result in released:
        if result.status == "released" and result.retry_state is not None:
            n += BatchItem.objects.filter(id=row.id, claimed_by=owner, status=ItemStatus.RUNNING).update(
                retry_state=result.retry_state.as_dict()
            )
    return n


def requeue_expired_claims(limit: int = 10_000) -> list[str]:
    """Claims whose lease ran out (their worker died) go back to pending. Returns the batches touched."""
    now = timezone.now()
    with transaction.atomic():
        rows = list(
            BatchItem.objects.filter(status=ItemStatus.RUNNING, claim_expires_at__lt=now)
            .select_for_update(skip_locked=True)
            .values_list("id", "batch_id", "custom_id", "claimed_by")[:limit]
        )
        if rows:
            journal.fold_unknown([(i, owner, str(b), c) for i, b, c, owner in rows])
            BatchItem.objects.filter(id__in=[r[0] for r in rows]).update(
                status=ItemStatus.PENDING, claimed_by="", claim_expires_at=None
            )
    return list(dict.fromkeys(str(r[1]) for r in rows))


def _end_unsent(batch_id: str, status: str, error_type: str, message: str, counter: str) -> int:
    """End pending items (and items under expired claims) of one batch in bulk."""
    now = timezone.now()
    claimable = Q(status=ItemStatus.PENDING) | Q(status=ItemStatus.RUNNING, claim_expires_at__lt=now)
    with transaction.atomic():
        rows = list(
            BatchItem.objects.filter(claimable, batch_id=batch_id)
            .select_for_update(skip_locked=True)
            .values_list("id", "claimed_by", "custom_id")
        )
        journal.fold_unknown([(i, owner, str(batch_id), c) for i, owner, c in rows if owner])
        ids = [r[0] for r in rows]
        n = BatchItem.objects.filter(id__in=ids).update(
            status=status,
            finished_at=now,
            claimed_by="",
            claim_expires_at=None,
            error_type=error_type,
            error_message=message,
        )
        if n:
            Batch.objects.filter(id=batch_id).update(**{counter: F(counter) + n})
    return n


def cancel_claimable(batch_id: str) -> int:
    """Cancel pending items and items under expired claims (nobody is sending them)."""
    return _end_unsent(
        batch_id,
        ItemStatus.CANCELLED,
        ErrorType.CANCELLED,
        "batch cancelled before the item was sent",
        "cancelled_count",
    )


def cancelled_with_unsent(limit: int = 100) -> list[str]:
    """Cancelled, unfinished batches that still have pending items (e.g. claims released by a
    dispatcher right after the cancel swept the batch)."""
    ids = (
        BatchItem.objects.filter(
            status=ItemStatus.PENDING, batch__status=BatchStatus.CANCELLED, batch__completed_at__isnull=True
        )
        .order_by()
        .values_list("batch_id", flat=True)
        .distinct()[:limit]
    )
    return [str(i) for i in ids]


def overdue_batches(limit: int = 100) -> list[str]:
    """Unfinished batches whose deadline has passed."""
    ids = Batch.objects.filter(
        expires_at__lt=timezone.now(), completed_at__isnull=True, status__in=ACTIVE_BATCH_STATUSES
    ).values_list("id", flat=True)[:limit]
    return [str(i) for i in ids]


def expire_unsent(batch_id: str) -> int:
    """Expire the pending items of an overdue batch in bulk (items under a live claim are expired by
    the engine that holds them, before their next send)."""
    return _end_unsent(
        batch_id,
        ItemStatus.EXPIRED,
        ErrorType.EXPIRED,
        "deadline passed before the item was sent",
        "expired_count",
    )


def mark_running(batch_id: str) -> bool:
    """A queued batch whose first items were claimed becomes running (started_at, ``batch_started``)."""
    if not Batch.objects.filter(id=batch_id, status=BatchStatus.QUEUED).update(
        status=BatchStatus.RUNNING, started_at=timezone.now()
    ):
        return False
    started = Batch.objects.filter(id=batch_id).only("id", "team_id", "total_count", "priority")
    signals.batch_started.send(sender=Batch, batch=started.first())
    return True

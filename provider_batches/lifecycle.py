"""One provider batch's life, worked one due step at a time: create (or, after a crash, adopt), poll
with growing intervals, cancel (the deadline guard, or the gateway batch's cancel), results.

Exactly once across crashes: the chunk's row (its intent) was stored with its items' claims before any
create; ``create_attempts`` is raised and committed BEFORE the create call, so a row found in
``intent`` with an attempt behind it is adopted, never created again: OpenAI/Azure by
``metadata.gateway_chunk``, Anthropic (no metadata) by the request count among the batches created
since the intent. Several candidates: logged loudly and left for an operator (state ``ambiguous``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from gateway_engine.backoff import capped_exponential
from gateway_engine.batch_api import BatchApiError, RemoteBatch, adoption_matches
from gateway_engine.routing import ProviderConfig

from . import budget, guard, remote
from .applying import all_to_realtime, apply_chunk, cancel_unsent
from .grouping import CLAIM_HOLD
from .lines import batch_line
from .models import ChunkState, ProviderBatch

log = logging.getLogger("provider_batches")
ADOPT_SLACK_SECONDS = 120.0  # clocks of the gateway and the provider may differ this much
KIND_WINDOW = "24h"


def work(row: ProviderBatch, configs: dict[str, ProviderConfig]) -> None:
    """One step of a claimed row; sets its next ``due_at`` (None when done)."""
    config = configs.get(row.provider)
    if config is None:
        log.error("provider batch %s: provider %r is gone; its items go to real time", row.id, row.provider)
        all_to_realtime(row, _any_config(configs, row), attempted=False)
        _finish(row, "provider removed")
        return
    try:
        if row.state == ChunkState.INTENT:
            _create_or_adopt(row, config)
        else:
            _poll(row, config)
    except BatchApiError as exc:
        _api_error(row, config, exc)


def _any_config(configs: dict[str, ProviderConfig], row: ProviderBatch) -> ProviderConfig:
    return next(iter(configs.values()))


def _create_or_adopt(row: ProviderBatch, config: ProviderConfig) -> None:
    if row.create_attempts and _adopt(row, config):
        return
    if (
        not row.create_attempts
        and Batch.objects.filter(id=row.batch_id, status=BatchStatus.CANCELLED).exists()
    ):
        n = cancel_unsent(row)  # never sent: its items end cancelled, no provider batch is created
        log.info(
            "provider batch %s: gateway batch cancelled before the create; %d items cancelled", row.id, n
        )
        _finish(row, "cancelled before the create")
        return
    if row.state == ChunkState.AMBIGUOUS:
        return
    if not row.create_attempts and not budget.hold(row, config):
        all_to_realtime(row, config, attempted=False)  # admission refuses them there, as any item
        _finish(row, "the team's budget has no room")
        remote.wake_dispatchers()
        return
    # the attempt is on record before the call: a crash from here on adopts, never creates again
    claimed = ProviderBatch.objects.filter(id=row.id, create_attempts=row.create_attempts).update(
        create_attempts=F("create_attempts") + 1
    )
    if not claimed:
        return  # another worker works this row
    row.create_attempts += 1
    items = BatchItem.objects.in_bulk(row.item_ids)
    lines = [
        batch_line(row.line_id(n), config, items[i].payload, items[i].endpoint)
        for n, i in enumerate(row.item_ids)
        if i in items
    ]
    created, calls = remote.call(config, lambda c: c.create(row.id, lines, KIND_WINDOW))
    log.info("provider batch %s: created %s at %s (%d lines)", row.id, created.id, row.provider, len(lines))
    _submitted(row, created, calls)


def _adopt(row: ProviderBatch, config: ProviderConfig) -> bool:
    """Find the provider batch an earlier, interrupted create made. True when adopted (or left
    ambiguous for an operator); False: none exists, create."""
    since = row.created_at.timestamp() - ADOPT_SLACK_SECONDS
    found, calls = remote.call(config, lambda c: c.list_since(since))
    _count_calls(row, calls)
    # a provider batch another chunk already holds is not this one's (Anthropic matches by count)
    taken = set(
        ProviderBatch.objects.filter(provider=row.provider, remote_id__in=[b.id for b in found])
        .exclude(id=row.id)
        .values_list("remote_id", flat=True)
    )
    candidates = [b for b in found if b.id not in taken]
    matches = adoption_matches(config.kind, candidates, row.id, since, row.line_count)
    if not matches:
        log.warning("provider batch %s: no provider batch of an earlier create found; creating it", row.id)
        return False
    if len(matches) > 1:
        log.error(
            "provider batch %s: AMBIGUOUS adoption — %d provider batches of %s match (%s); left for an "
            "operator, nothing created again",
            row.id, len(matches), row.provider, ", ".join(b.id for b in matches),
        )  # fmt: skip
        ProviderBatch.objects.filter(id=row.id).update(
            state=ChunkState.AMBIGUOUS, due_at=None, note=f"candidates: {', '.join(b.id for b in matches)}"
        )
        row.state = ChunkState.AMBIGUOUS
        return True
    log.warning("provider batch %s: adopted %s after an interrupted create", row.id, matches[0].id)
    _submitted(row, matches[0], 0)
    return True


def _submitted(row: ProviderBatch, created: RemoteBatch, calls: int) -> None:
    now = timezone.now()
    expires = dt.datetime.fromtimestamp(created.expires_at, dt.UTC) if created.expires_at else None
    ProviderBatch.objects.filter(id=row.id).update(
        state=ChunkState.SUBMITTED,
        remote_id=created.id,
        remote_state=created.state,
        submitted_at=now,
        expires_at=expires,
        due_at=now + dt.timedelta(seconds=_poll_interval(0)),
    )
    _count_calls(row, calls)


def _poll_interval(polls: int) -> float:
    low = float(settings.GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS)
    high = max(low, float(settings.GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS))
    return capped_exponential(low, high, polls, factor=1.5)


def _poll(row: ProviderBatch, config: ProviderConfig) -> None:
    batch = Batch.objects.get(id=row.batch_id)
    if batch.status == BatchStatus.CANCELLED and row.state != ChunkState.CANCELING:
        _cancel(row, config, "cancelled")
    got, calls = remote.call(config, lambda c: c.get(row.remote_id))
    _count_calls(row, calls)
    _record(row, got)
    if got.ended:
        _results(row, config, got, batch)
        return
    now = timezone.now()
    remaining = max(0, row.line_count - got.succeeded - got.errored)
    fire = guard.guard_time(batch.expires_at, remaining, config, guard.queued_ahead(config.name))
    if fire is not None and now >= fire and row.state == ChunkState.SUBMITTED:
        log.warning(
            "provider batch %s: deadline guard — %d lines left, batch %s expires %s: cancelling, the rest "
            "go real time", row.id, remaining, batch.id, batch.expires_at,
        )  # fmt: skip
        _cancel(row, config, "deadline")
    wait = _poll_interval(row.polls) if row.state != ChunkState.CANCELING else _poll_interval(0)
    due = now + dt.timedelta(seconds=wait)
    if fire is not None and row.state == ChunkState.SUBMITTED:
        due = min(due, max(now, fire))
    ProviderBatch.objects.filter(id=row.id).update(polls=F("polls") + 1, due_at=due)
    BatchItem.objects.filter(claimed_by=row.owner, status=ItemStatus.RUNNING).update(
        claim_expires_at=now + CLAIM_HOLD
    )


def _cancel(row: ProviderBatch, config: ProviderConfig, reason: str) -> None:
    got, calls = remote.call(config, lambda c: c.cancel(row.remote_id))
    _count_calls(row, calls)
    ProviderBatch.objects.filter(id=row.id).update(state=ChunkState.CANCELING, cancel_reason=reason)
    row.state, row.cancel_reason = ChunkState.CANCELING, reason
    _record(row, got)


def _record(row: ProviderBatch, got: RemoteBatch) -> None:
    ProviderBatch.objects.filter(id=row.id).update(
        remote_state=got.state,
        succeeded_count=got.succeeded,
        errored_count=got.errored,
        canceled_count=got.canceled,
        expired_count=got.expired,
    )


def _results(row: ProviderBatch, config: ProviderConfig, got: RemoteBatch, batch: Batch) -> None:
    cancelled = batch.status == BatchStatus.CANCELLED or row.cancel_reason == "cancelled"
    allowed = not cancelled and guard.time_remains(batch.expires_at)
    if got.state == "failed":
        log.warning(
            "provider batch %s: %s failed validation (%s): its items go to real time",
            row.id,
            got.id,
            got.errors[:3],
        )
        all_to_realtime(row, config, attempted=True) if allowed else apply_chunk(
            row, config, [], realtime_allowed=False, cancelled=cancelled, latency_ms=0
        )
        _finish(row, "failed validation")
        remote.wake_dispatchers()
        return
    lines, calls = remote.call(config, lambda c: c.results(got))
    _count_calls(row, calls)
    started = row.submitted_at or row.created_at
    latency_ms = int(max(0.0, time.time() - started.timestamp()) * 1000)
    log.info("provider batch %s: %s %s, %d line results read", row.id, got.id, got.state, len(lines))
    written, handed = apply_chunk(
        row, config, lines, realtime_allowed=allowed, cancelled=cancelled, latency_ms=latency_ms
    )
    log.info("provider batch %s: %d results applied, %d items back to real time", row.id, written, handed)
    _finish(row, "")
    if handed:
        remote.wake_dispatchers()


def _finish(row: ProviderBatch, note: str) -> None:
    ProviderBatch.objects.filter(id=row.id).update(
        state=ChunkState.DONE, ended_at=timezone.now(), due_at=None, **({"note": note} if note else {})
    )
    budget.release(row)  # the result writer charged the reported usage


def _count_calls(row: ProviderBatch, calls: int) -> None:
    if calls:
        ProviderBatch.objects.filter(id=row.id).update(http_calls=F("http_calls") + calls)
        Batch.objects.filter(id=row.batch_id).update(batch_api_calls=F("batch_api_calls") + calls)


def _api_error(row: ProviderBatch, config: ProviderConfig, exc: BatchApiError) -> None:
    """A refused call. Retryable (429, 5xx, no answer): due again after its wait. A refused create
    (4xx: the file too large, a bad line): the chunk's items go to real time."""
    _count_calls(row, 1)
    if exc.retryable:
        wait = exc.retry_after or _poll_interval(row.polls)
        log.warning("provider batch %s: %r; again in %.1fs", row.id, exc, wait)
        ProviderBatch.objects.filter(id=row.id).update(
            due_at=timezone.now() + dt.timedelta(seconds=wait), polls=F("polls") + 1
        )
        return
    if row.state == ChunkState.INTENT:
        log.warning("provider batch %s: create refused (%r): its items go to real time", row.id, exc)
        all_to_realtime(row, config, attempted=False)
        _finish(row, f"create refused: {exc.message}"[:500])
        remote.wake_dispatchers()
        return
    log.error("provider batch %s: %r while polling; again later", row.id, exc)
    ProviderBatch.objects.filter(id=row.id).update(
        due_at=timezone.now() + dt.timedelta(seconds=_poll_interval(row.polls)), polls=F("polls") + 1
    )

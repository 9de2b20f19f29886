"""The deadline guard: when the time left before the gateway batch's ``expires_at`` falls to what the
real-time path needs for a provider batch's remaining lines — at the provider's real-time rate, behind
what is already queued for it in real time — plus a margin, the provider batch is cancelled and what it
did not finish goes through real time (docs/provider_batches.md "Deadline guard")."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone

from batches.models import BatchItem, ItemStatus, ServedVia
from gateway_engine.routing import ProviderConfig


def realtime_seconds(lines: int, config: ProviderConfig, queued_ahead: int = 0) -> float:
    """Seconds the real-time path needs for ``lines`` more requests to ``config`` behind
    ``queued_ahead`` others, at its RPM (the margin covers the latency of the last ones)."""
    return (lines + queued_ahead) / max(1e-6, config.limits.rpm / 60.0)


def queued_ahead(provider: str) -> int:
    """Real-time items waiting for ``provider`` now (one count on the queue index)."""
    return BatchItem.objects.filter(
        status=ItemStatus.PENDING, served_via=ServedVia.REALTIME, queue_provider=provider
    ).count()


def guard_time(
    expires_at: dt.datetime | None, remaining: int, config: ProviderConfig, ahead: int
) -> dt.datetime | None:
    """When the guard fires for a chunk with ``remaining`` unfinished lines (None: no deadline)."""
    if expires_at is None:
        return None
    need = realtime_seconds(remaining, config, ahead) + float(
        settings.GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS
    )
    return expires_at - dt.timedelta(seconds=need)


def time_remains(expires_at: dt.datetime | None, now: dt.datetime | None = None) -> bool:
    """Whether real time may still take items of a batch with this deadline."""
    return expires_at is None or expires_at > (now or timezone.now())

"""A provider batch's budget: the team's ledger holds the discounted estimate (``batch_price_factor`` ×
the engine's token estimate of its lines) from the create until the chunk is done; the result writer
charges each applied line's reported usage, and the hold is then given back — the ledger ends at the
reported usage. A team without budgets holds nothing."""

from __future__ import annotations

import logging

from batches.models import Batch, BatchItem
from batches.submission.budget import estimate_payload_tokens
from gateway_engine.quota.types import BudgetExceeded, QuotaStoreUnavailable
from gateway_engine.redis_errors import REDIS_ERRORS
from gateway_engine.routing import ProviderConfig
from providers.limits.budgets import give_back_tokens, reserve_tokens

from .models import ProviderBatch

log = logging.getLogger("provider_batches")


def hold(row: ProviderBatch, config: ProviderConfig) -> bool:
    """Reserve the chunk's discounted estimate. False: the team's budget has no room (its items go to
    real time, where admission refuses them as for any item)."""
    batch = Batch.objects.select_related("team").get(id=row.batch_id)
    payloads = BatchItem.objects.filter(id__in=row.item_ids).values_list("payload", flat=True)
    factor = config.batch.price_factor if config.batch else 1.0
    tokens = int(estimate_payload_tokens(payloads) * factor)
    try:
        reservation = reserve_tokens(batch.team, tokens)
    except BudgetExceeded as exc:
        log.warning("provider batch %s: the team's budget has no room for %d tokens: %s", row.id, tokens, exc)
        return False
    except (QuotaStoreUnavailable, *REDIS_ERRORS) as exc:  # the ledger is re-seeded from the records later
        log.warning("provider batch %s: budget not reserved (quota store unavailable): %s", row.id, exc)
        return True
    if reservation is not None:
        ProviderBatch.objects.filter(id=row.id).update(
            reserved_tokens=reservation.tokens, reserved_keys=list(reservation.keys)
        )
    return True


def release(row: ProviderBatch) -> None:
    """Give the hold back (once: the row's reservation is cleared in the same step)."""
    fresh = ProviderBatch.objects.filter(id=row.id).values_list("reserved_tokens", "reserved_keys").first()
    if not fresh or not fresh[0]:
        return
    tokens, keys = fresh
    ProviderBatch.objects.filter(id=row.id).update(reserved_tokens=0, reserved_keys=[])
    team = Batch.objects.filter(id=row.batch_id).values_list("team__name", flat=True).first() or ""
    try:
        give_back_tokens(team, keys, tokens)
    except (QuotaStoreUnavailable, *REDIS_ERRORS) as exc:
        log.warning("provider batch %s: budget hold of %d tokens not given back: %s", row.id, tokens, exc)

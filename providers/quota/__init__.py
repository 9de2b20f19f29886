"""The quota engine: shared RPM/TPM token buckets, concurrency leases, 429 pauses, live limits.

    from providers.quota import get_quota_store, LimitsSource

    store = get_quota_store()                   # process-wide; safe across asyncio.run() calls
    limits = await LimitsSource.shared().get("alpha")
    res = await store.acquire(limits, tokens)   # bucket first ...
    async with store.global_slot(), store.lease(limits):   # ... then the concurrency slots
        ...call the provider...
    await store.reconcile(limits, res, actual_total_tokens)
    await store.penalize(limits, retry_after_seconds)      # on a 429
    await store.aclose()                        # at the end of each asyncio.run (Redis: closes the
                                                # connection pool bound to that loop)

See docs/quota.md.
"""

from __future__ import annotations

from .base import BaseQuotaStore, Lease
from .config import LimitsSource, UnknownProvider
from .factory import get_quota_store, reset_quota_store, snapshot_all_sync
from .local import LocalQuotaStore
from .types import (
    BudgetExceeded,
    BudgetReservation,
    Decision,
    ProviderLimits,
    ProviderQuotaState,
    QuotaError,
    QuotaImpossible,
    QuotaStoreUnavailable,
    Reservation,
    TeamLimits,
)

__all__ = [
    "BaseQuotaStore",
    "BudgetExceeded",
    "BudgetReservation",
    "TeamLimits",
    "Decision",
    "Lease",
    "LimitsSource",
    "LocalQuotaStore",
    "ProviderLimits",
    "ProviderQuotaState",
    "QuotaError",
    "QuotaImpossible",
    "QuotaStoreUnavailable",
    "Reservation",
    "UnknownProvider",
    "get_quota_store",
    "reset_quota_store",
    "snapshot_all_sync",
]

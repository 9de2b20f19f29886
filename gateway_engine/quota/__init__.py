"""The quota engine: shared RPM/TPM token buckets, concurrency leases, 429 pauses, live limits.

    store = RedisQuotaStore(url, prefix="bgw:")  # or LocalQuotaStore() in one process; the Django side
                                                # builds the process-wide one: providers.limits.get_quota_store()
    limits = ProviderLimits("alpha", rpm=600, tpm=60_000, burst_seconds=5, max_concurrency=8, timeout_seconds=30)
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

from .leases import Lease
from .local import LocalQuotaStore
from .redis_store import RedisQuotaStore
from .store import ComposedQuotaStore
from .team_quota import TeamLimits, TeamQuota
from .types import (
    BudgetExceeded,
    BudgetReservation,
    Decision,
    LeaseBusy,
    PauseState,
    ProviderLimits,
    ProviderPaused,
    ProviderQuotaState,
    QuotaError,
    QuotaImpossible,
    QuotaStoreUnavailable,
    Reservation,
)

__all__ = [
    "BudgetExceeded",
    "BudgetReservation",
    "ComposedQuotaStore",
    "TeamLimits",
    "Decision",
    "Lease",
    "LeaseBusy",
    "LocalQuotaStore",
    "PauseState",
    "ProviderLimits",
    "ProviderPaused",
    "ProviderQuotaState",
    "QuotaError",
    "QuotaImpossible",
    "QuotaStoreUnavailable",
    "RedisQuotaStore",
    "Reservation",
    "TeamQuota",
]

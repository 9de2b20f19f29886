"""The in-process quota store (REDIS_URL unset): the same semantics as the Redis store, for one process
(every thread and event loop of it), on time.monotonic or an injected clock."""

from __future__ import annotations

import time

from ..protocols import Clock
from .config_version import LocalConfigVersion
from .local_buckets import LocalTokenBuckets
from .local_leases import LocalLeases
from .local_ledger import LocalBudgetLedger
from .local_state import LocalState
from .store import ComposedQuotaStore


class LocalQuotaStore(ComposedQuotaStore):
    backend = "local"

    def __init__(
        self,
        clock: Clock = time.monotonic,
        global_max_in_flight: int | None = None,
        cluster_max_in_flight: int | None = 0,  # one process: the per-process cap is the cluster cap
    ):
        state = LocalState(clock)
        super().__init__(
            LocalTokenBuckets(state),
            LocalLeases(state),
            LocalBudgetLedger(state.lock),
            LocalConfigVersion(),
            global_max_in_flight,
            cluster_max_in_flight,
        )

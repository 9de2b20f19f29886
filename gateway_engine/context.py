"""``RunContext``: what one engine run works with, handed to its parts (admission, item life, queues)
as one value instead of the parts holding the batcher."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from .http import HttpClients
from .observer import EngineObserver
from .options import EngineOptions
from .protocols import AttemptJournal, Breaker, Clock, LimitsProvider, QuotaStore
from .routing import RoutingTable

__all__ = ["RunContext"]


@dataclass(frozen=True)
class RunContext:
    """One ``abatch`` call's collaborators and tunables (bound to its event loop through ``http``)."""

    table: RoutingTable
    store: QuotaStore
    breaker: Breaker
    options: EngineOptions
    limits_source: LimitsProvider | None
    journal: AttemptJournal
    observer: EngineObserver
    http: HttpClients
    salt: str = ""  # the weighted draw's salt for items without a batch_id
    rng: random.Random = field(default_factory=random.Random)  # backoff jitter, breaker-wait jitter
    clock: Clock = time.monotonic  # measured waits (quota, breaker) and the outage backoff

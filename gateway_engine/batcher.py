"""The engine's public facade: ``CrossProviderBatcher`` runs work items over many providers, each item
routed, admitted, sent and retried with failure isolation; one ItemResult per item, in input order.

No ORM in here. Input: work items and a RoutingTable (plain dataclasses). One ``abatch`` call builds a
``RunContext`` and hands it to ``run.run_items``, which builds the run's parts, each in its own module:
``queues`` (per preferred provider, shortest first), ``attempts`` (one item's life: breaker, attempts,
retry, fallback), ``admission`` (budget → bucket token → lane → lease → in-flight slot; no idle token
holders), ``outcomes`` (what an answer means), ``stopping`` (``RunControl``: cancel, deadline, drain)
and ``outage`` (riding through a quota-store outage). ``feed.ItemFeed`` is the streaming item source.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .breaker import LocalBreaker
from .context import RunContext
from .http import HttpClients
from .items import ItemResult, RawItem
from .journal import NULL_JOURNAL
from .observer import NULL_OBSERVER, EngineObserver
from .options import EngineOptions
from .protocols import (
    AsyncCloseable,
    AttemptJournal,
    Breaker,
    ItemSource,
    LimitsProvider,
    QuotaStore,
    ResultSink,
)
from .quota.local import LocalQuotaStore
from .routing import RoutingTable, routing_table_from_config
from .run import run_items
from .stopping import RunControl, Stopping

__all__ = ["CrossProviderBatcher"]

log = logging.getLogger(__name__)


class CrossProviderBatcher:
    """Runnable-style batch executor over many providers.

    ``batch(items)`` / ``await abatch(items)`` → list of ItemResult in input order. Items are WorkItems
    or contract ITEM dicts. Usable from plain Python::

        batcher = CrossProviderBatcher.from_config({"providers": [...], "routes": [...]},
                                                   global_max_in_flight=32)
        results = batcher.batch([{"custom_id": "1", "route": "intent", "query": "hi"}])

    What it talks to is typed in ``gateway_engine.protocols``: a ``QuotaStore`` (default: a fresh
    ``LocalQuotaStore``), a ``Breaker`` (default: a ``LocalBreaker``), an optional ``LimitsProvider``
    (live limits; without one the routing table's limits apply) and an ``EngineObserver``. The
    gateway's Celery side (``batches.execution.build_batcher``) passes the shared store, breaker and
    LimitsSource and builds ``options`` from its settings.
    """

    def __init__(
        self,
        table: RoutingTable,
        *,
        store: QuotaStore | None = None,
        breaker: Breaker | None = None,
        limits_source: LimitsProvider | None = None,
        options: EngineOptions | None = None,
        global_max_in_flight: int = 64,
        salt: str = "",
        observer: EngineObserver | None = None,
        journal: AttemptJournal | None = None,
    ):
        self.table = table
        self.store: QuotaStore = (
            store if store is not None else LocalQuotaStore(global_max_in_flight=global_max_in_flight)
        )
        self.breaker: Breaker = breaker if breaker is not None else LocalBreaker()
        self.limits_source = limits_source
        self.options = options or EngineOptions()
        self.salt = salt
        self.observer: EngineObserver = observer or NULL_OBSERVER
        self.journal: AttemptJournal = journal or NULL_JOURNAL
        self.last_stats: dict[str, Any] | None = None

    @classmethod
    def from_config(cls, data: Mapping[str, Any], **kwargs: Any) -> CrossProviderBatcher:
        """From the provider file's shape (docs/contract.md §3): {"providers": [...], "routes": [...]}."""
        return cls(routing_table_from_config(data), **kwargs)

    async def abatch(
        self,
        items: Iterable[RawItem] | ItemSource,
        *,
        on_result: ResultSink | None = None,
        should_cancel: Callable[[], bool] | None = None,
        batch_id: str = "",
        control: RunControl | None = None,
    ) -> list[ItemResult]:
        """Run every item; results in input order (for an async source: in arrival order).

        A list is grouped per preferred provider and served shortest first; an async source (e.g.
        ``ItemFeed``) is served FIFO per provider as items arrive, until the source ends."""
        stopping = Stopping(should_cancel, control)  # binds ``control`` to this event loop
        report = await run_items(self._context(), items, stopping, on_result=on_result, batch_id=batch_id)
        self.last_stats = report.stats
        return report.results

    def batch(self, items: Iterable[RawItem], **kwargs: Any) -> list[ItemResult]:
        """Synchronous wrapper (own event loop); closes loop-bound store/breaker clients afterwards."""

        async def main() -> list[ItemResult]:
            try:
                return await self.abatch(items, **kwargs)
            finally:
                await _aclose_quietly(self.store)
                await _aclose_quietly(self.breaker)

        return asyncio.run(main())

    def _context(self) -> RunContext:
        """This run's context (its HTTP clients and random stream are new for every run)."""
        opts = self.options
        http = HttpClients(max_answer_bytes=opts.max_answer_bytes)
        return RunContext(
            self.table,
            self.store,
            self.breaker,
            opts,
            self.limits_source,
            self.journal,
            self.observer,
            http,
            salt=self.salt,
            rng=random.Random(opts.seed),
        )


async def _aclose_quietly(obj: AsyncCloseable) -> None:
    try:
        await obj.aclose()
    except Exception:  # noqa: BLE001 - closing a pool at the end of a run must not mask results
        log.warning("could not close %r", obj, exc_info=True)

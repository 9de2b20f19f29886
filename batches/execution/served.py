"""What served an item and the result it got: the value types the one result writer takes
(batches.execution.apply). Imports nothing heavy: the model only for type checking.

``ServedBy.REALTIME`` — the engine sent the item's attempts in this process; the engine already settled
the team's budget ledger (``gateway_engine.admission``) and emitted the per-attempt metrics (the
``EngineObserver``). ``PROVIDER_BATCH`` (a provider's batch API, issue #23) and ``CACHE`` (issue #25) —
served outside the engine: the writer accounts their usage itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from gateway_engine.items import ItemResult

if TYPE_CHECKING:
    from batches.models import BatchItem


class ServedBy(StrEnum):
    REALTIME = "realtime"
    PROVIDER_BATCH = "provider_batch"
    CACHE = "cache"


@dataclass(frozen=True, slots=True)
class Served:
    """One claimed item, its final engine-shaped result, and what served it."""

    item: BatchItem
    result: ItemResult
    served_by: ServedBy = ServedBy.REALTIME

    @property
    def accounted_by_engine(self) -> bool:
        """True when the engine already counted the budget and the metrics of this result."""
        return self.served_by == ServedBy.REALTIME

    @property
    def billed(self) -> bool:
        """False for a cache hit (or an identical item's answer): it cost no provider call, so its usage
        is shown in the RESULT but charged to no budget, usage row or cost (docs/cache.md)."""
        return self.served_by != ServedBy.CACHE

    @property
    def stored_result(self) -> ItemResult:
        """The result as the row stores it: ``served_by`` says what served it."""
        if self.result.served_by == self.served_by:
            return self.result
        return replace(self.result, served_by=str(self.served_by))


def as_served(
    entries: Iterable[tuple[BatchItem, ItemResult]], served_by: ServedBy = ServedBy.REALTIME
) -> list[Served]:
    """(item, result) pairs as ``Served`` values, all served by ``served_by``."""
    return [Served(item, result, served_by) for item, result in entries]

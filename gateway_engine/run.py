"""One engine run (one ``abatch`` call): builds the run's parts around its ``RunContext`` — stopping,
live limits, admission, the item life, the outage ride, the per-provider queues — serves every item
and returns the results in input order with the run's stats."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .admission import Admission
from .attempts import ItemLife
from .context import RunContext
from .items import ItemResult, RawItem
from .live_limits import LiveLimits
from .outage import OutageRide
from .protocols import ItemSource, ResultSink
from .queues import ProviderQueues
from .stats import build_stats
from .stopping import Stopping

__all__ = ["RunReport", "run_items"]


@dataclass(frozen=True)
class RunReport:
    """A finished run: one result per item (input order, or arrival order for a source) and its stats."""

    results: list[ItemResult]
    stats: dict[str, Any]


async def run_items(
    ctx: RunContext,
    items: Iterable[RawItem] | ItemSource,
    stopping: Stopping,
    *,
    on_result: ResultSink | None,
    batch_id: str,
) -> RunReport:
    """Serve every item to its end; the first error that ends the run is raised as itself (not as an
    exception group). The run's HTTP clients are closed afterwards."""
    limits = LiveLimits(ctx.limits_source)
    admission = Admission(ctx.store, limits, ctx.options, stopping.should_cancel)
    life = ItemLife(ctx, admission, limits, stopping, OutageRide(ctx.options, ctx.clock))
    queues = ProviderQueues(ctx, life, on_result)
    started = time.monotonic()
    ctx.observer.on_run_start(batch_id, len(items) if isinstance(items, list) else 0)
    try:
        async with asyncio.TaskGroup() as tg:
            await queues.serve(tg, items)
    except BaseExceptionGroup as group:
        raise _first_leaf(group) from None
    finally:
        ctx.observer.on_run_end(batch_id)
        await ctx.http.aclose()
    final = queues.final()
    elapsed_ms = int((time.monotonic() - started) * 1000)
    return RunReport(final, build_stats(batch_id, final, len(queues.work), elapsed_ms))


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception of a (nested) exception group: what a TaskGroup's caller re-raises."""
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first

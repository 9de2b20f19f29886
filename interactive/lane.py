"""The process's interactive lane: one ``gateway_engine.interactive.InteractiveLane`` per running event
loop (the ASGI worker's), wired to the shared quota store, breaker and live limits like the batch
workers (batches.execution.build_batcher), so both lanes shape one stream per provider."""

from __future__ import annotations

import asyncio
import weakref

from asgiref.sync import sync_to_async

from batches.execution import engine_options
from batches.execution import observers as observer_hooks
from gateway_engine.interactive import InteractiveLane
from gateway_engine.routing import RoutingTable
from providers.limits import LimitsSource, get_quota_store
from providers.shared_breaker import get_breaker

from .targets import Targets

targets = Targets()
_lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, InteractiveLane] = weakref.WeakKeyDictionary()


async def _observer(table: RoutingTable):
    """The lane's observer for this table (its prices are read from the database: in a thread)."""
    return await sync_to_async(observer_hooks.observer_for, thread_sensitive=False)("", table, "interactive")


def current_lane() -> InteractiveLane:
    """This loop's lane (created on first use)."""
    loop = asyncio.get_running_loop()
    lane = _lanes.get(loop)
    if lane is None:
        lane = _lanes[loop] = InteractiveLane(
            targets.table,
            store=get_quota_store(),
            breaker=get_breaker(),
            limits_source=LimitsSource.shared(),
            options=engine_options(),
            observer_for=_observer,
        )
    return lane


async def close_lane() -> None:
    """Close this loop's lane (its provider connections): the ASGI lifespan's shutdown."""
    lane = _lanes.pop(asyncio.get_running_loop(), None)
    if lane is not None:
        await lane.aclose()

"""The routes and providers calls may name, and the routing table, as this process last read them:
reloaded (in a thread: the ORM never runs on the event loop) when the shared provider-config version
moved, checked at most every GATEWAY_CONFIG_REFRESH_SECONDS."""

from __future__ import annotations

import asyncio
import time
import weakref

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from batches.submission.service import load_targets
from batches.submission.targets import KnownTargets
from gateway_engine.endpoints import EMBEDDINGS, ENDPOINTS
from gateway_engine.kinds import embeddings_api
from gateway_engine.routing import RoutingTable
from providers.limits import get_quota_store


def _load() -> tuple[KnownTargets, RoutingTable]:
    try:
        return load_targets()
    finally:
        close_old_connections()


def model_endpoints(known: KnownTargets, name: str) -> list[str]:
    """The endpoints a model id (a route, else a provider) serves, in ``ENDPOINTS`` order (``GET
    /v1/models`` says them as ``endpoints``): chat, responses and messages on every kind (the two are
    translated to chat at their surface); embeddings when every provider it reaches has an embeddings
    API (``kinds.embeddings_api``), as submission and the interactive lane require. A route that
    reaches no enabled provider serves nothing."""
    reach = known.reach
    if name in known.routes:
        configs = reach.routes.get(name, ())
    else:
        config = reach.providers.get(name)
        configs = () if config is None else (config,)
    if not configs:
        return []
    embeds = all(embeddings_api(c.kind) is not None for c in configs)
    return [e for e in ENDPOINTS if e != EMBEDDINGS or embeds]


class Targets:
    """One process's view of the routing data (one event loop at a time reads it)."""

    def __init__(self) -> None:
        self._held: tuple[KnownTargets, RoutingTable] | None = None
        self._version: int | None = None
        self._checked = -1e9
        # one lock per event loop (an asyncio.Lock belongs to one loop; under WSGI every call has its own)
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    async def current(self) -> tuple[KnownTargets, RoutingTable]:
        now = time.monotonic()
        held = self._held
        if held is not None and now - self._checked < float(settings.GATEWAY_CONFIG_REFRESH_SECONDS):
            return held
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            held = self._held
            if held is not None and time.monotonic() - self._checked < float(
                settings.GATEWAY_CONFIG_REFRESH_SECONDS
            ):
                return held
            version = await get_quota_store().config_version()
            if held is None or version != self._version:
                held = self._held = await sync_to_async(_load, thread_sensitive=False)()
                self._version = version
            self._checked = time.monotonic()
            return held

    async def table(self) -> RoutingTable:
        return (await self.current())[1]

    def forget(self) -> None:
        """Reload on the next call (tests that change the rows without bumping the version)."""
        self._held, self._version = None, None

"""Live provider limits for the async engine.

`LimitsSource` caches ProviderLimits for every provider. At most every
settings.GATEWAY_CONFIG_REFRESH_SECONDS (≤ 5 s) it reads the shared config version (one Redis GET, or a
module counter in single-process mode); when the version moved — an admin save or `load_providers`
bumped it — it reloads the Provider rows in a worker thread, so the event loop never runs ORM code.
A full reload also happens every MAX_AGE_SECONDS in case a version bump was lost.

Lowered limits take effect at once in the buckets: every store call passes the current rates and
capacities, and the bucket is clamped to the new capacity on that call.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable

from django.conf import settings

from .types import ProviderLimits

log = logging.getLogger(__name__)

MAX_AGE_SECONDS = 60.0


class UnknownProvider(LookupError):
    def __init__(self, name: str):
        self.provider = name
        super().__init__(f"no provider named {name!r} is configured")


def load_limits_from_db() -> dict[str, ProviderLimits]:
    """Sync: every Provider row (enabled or not) as ProviderLimits. Runs in a worker thread."""
    from django.db import connections

    from providers.models import Provider

    try:
        return {p.name: ProviderLimits.from_provider(p) for p in Provider.objects.all()}
    finally:
        connections.close_all()  # this thread's connections only; reloads are rare


class LimitsSource:
    """`limits = await source.get("alpha")`; `await source.get_many()` -> {name: ProviderLimits}."""

    _shared: LimitsSource | None = None
    _shared_lock = threading.Lock()

    def __init__(
        self,
        store=None,
        refresh_seconds: float | None = None,
        loader: Callable[[], dict[str, ProviderLimits]] = load_limits_from_db,
    ):
        self._store = store
        self.refresh_seconds = (
            float(settings.GATEWAY_CONFIG_REFRESH_SECONDS)
            if refresh_seconds is None
            else float(refresh_seconds)
        )
        self._loader = loader
        self._limits: dict[str, ProviderLimits] = {}
        self._version: int | None = None
        self._loaded_at = 0.0
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._refreshing: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def shared(cls) -> LimitsSource:
        """One source per process (uses get_quota_store() for the version check)."""
        if cls._shared is None:
            with cls._shared_lock:
                if cls._shared is None:
                    cls._shared = cls()
        return cls._shared

    @classmethod
    def reset_shared(cls) -> None:
        """Forget the process-wide source (tests; reset_quota_store() calls this too)."""
        with cls._shared_lock:
            cls._shared = None

    @property
    def store(self):
        if self._store is None:
            from .factory import get_quota_store

            return get_quota_store()
        return self._store

    @property
    def version(self) -> int | None:
        return self._version

    async def refresh(self, force: bool = False) -> None:
        """Check the config version now (and reload if it moved, or if force)."""
        now = time.monotonic()
        with self._lock:
            self._next_check = now + self.refresh_seconds
        version = await self.store.config_version()
        stale = now - self._loaded_at >= MAX_AGE_SECONDS
        if force or stale or version != self._version or not self._loaded_at:
            limits = await asyncio.to_thread(self._loader)
            if self._version is not None and version != self._version:
                log.info("provider config reloaded", extra={"event": "config_reloaded", "version": version})
            with self._lock:
                self._limits = limits
                self._version = version
                self._loaded_at = now

    async def _maybe_refresh(self) -> None:
        if not self._loaded_at or time.monotonic() >= self._next_check:
            # one refresh per loop at a time; concurrent callers wait for it (so nobody sees an
            # empty cache on the first call)
            loop = asyncio.get_running_loop()
            with self._lock:
                task = self._refreshing.get(loop)
                if task is None or task.done():
                    task = loop.create_task(self.refresh())
                    self._refreshing[loop] = task
            await asyncio.shield(task)

    async def get(self, name: str) -> ProviderLimits:
        await self._maybe_refresh()
        limits = self._limits.get(name)
        if limits is None:
            raise UnknownProvider(name)
        return limits

    async def get_many(self, names: Iterable[str] | None = None) -> dict[str, ProviderLimits]:
        await self._maybe_refresh()
        if names is None:
            return dict(self._limits)
        out = {}
        for name in names:
            if name not in self._limits:
                raise UnknownProvider(name)
            out[name] = self._limits[name]
        return out

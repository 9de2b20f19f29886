"""Live provider and team limits for the async engine (the Django side of gateway_engine.quota's limits).

`LimitsSource` caches ProviderLimits for every provider and TeamLimits for every team.

Change events: in Redis mode every source listens (one daemon thread per source) on the config
pub/sub channel that `providers.live_config.bump_config_version()` publishes to on commit, and reloads
the rows in that thread as soon as a change is announced (several announcements that arrive together
cause one reload). In single-process mode the bump invalidates the source directly, and the next
`get()` reloads. The poll below stays as the fallback: at most every
settings.GATEWAY_CONFIG_REFRESH_SECONDS (default 2 s) it reads the shared config version (one Redis GET,
or a module counter in single-process mode); when the version moved it reloads the Provider and Team
rows in a worker thread, so the event loop never runs ORM code. A full reload also happens every
MAX_AGE_SECONDS in case both an announcement and a version bump were lost.

Provider pauses: every reload also loads the durable pauses (providers.pauses.durable_pauses, the
ProviderPause rows) into the store's local view (``store.hold_pauses``: grants check it first, waiters of
a newly paused provider wake, a Retry-After wait included), and the next refresh writes them back into
the store (``store.refill_pauses``: after a Redis restart the store holds none). A pause set or cleared
anywhere bumps the config version, so every process reloads it within milliseconds.

Lowered limits take effect at once in the buckets: every store call passes the current rates and
capacities, the bucket is clamped to the new capacity on that call, and callers that are already
waiting re-ask with `peek()`/`peek_team()` (the cached limits, no await) on every retry.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable

from django.conf import settings
from django.db import connections

from gateway_engine.backoff import capped_exponential
from gateway_engine.errors import ApplicationError
from gateway_engine.quota.team_quota import TeamLimits
from gateway_engine.quota.types import PauseState, ProviderLimits
from gateway_site.forksafe import after_fork
from gateway_site.redis import sync_redis
from providers.adapters import provider_limits
from providers.live_config import config_channel, register_listener
from providers.models import Provider
from providers.pauses import durable_pauses
from teams.limits import team_limits
from teams.models import Team
from teams.usage import seed_budget_from_db

from .factory import forget_quota_store, forget_quota_store_after_fork, get_quota_store

log = logging.getLogger(__name__)

MAX_AGE_SECONDS = 60.0
LISTEN_RETRY_MIN_SECONDS = 0.1
LISTEN_RETRY_MAX_SECONDS = 5.0


class UnknownProvider(ApplicationError, LookupError):
    status = 404
    code = "unknown_provider"

    def __init__(self, name: str):
        self.provider = name
        super().__init__(f"no provider named {name!r} is configured")


def load_limits_from_db() -> dict[str, ProviderLimits]:
    """Sync: every Provider row (enabled or not) as ProviderLimits. Runs in a worker thread."""
    try:
        return {p.name: provider_limits(p) for p in Provider.objects.all()}
    finally:
        connections.close_all()  # this thread's connections only; reloads are rare


def load_pauses_from_db() -> dict[str, PauseState]:
    """Sync: every provider's durable pause that has not ended. Runs in a worker thread."""
    try:
        return durable_pauses()
    finally:
        connections.close_all()


def load_team_limits_from_db() -> dict[str, TeamLimits]:
    """Sync: every Team row as TeamLimits. Runs in a worker thread."""
    try:
        return {t.name: team_limits(t) for t in Team.objects.all()}
    finally:
        connections.close_all()


class LimitsSource:
    """`limits = await source.get("alpha")`; `await source.team("acme")` -> TeamLimits or None;
    `source.peek("alpha", default)` (sync, cached only)."""

    _shared: LimitsSource | None = None
    _shared_lock = threading.Lock()

    def __init__(
        self,
        store=None,
        refresh_seconds: float | None = None,
        loader: Callable[[], dict[str, ProviderLimits]] = load_limits_from_db,
        team_loader: Callable[[], dict[str, TeamLimits]] | None = load_team_limits_from_db,
        listen: bool | None = None,
        budget_seed: Callable[[str, str, str], int] | None = seed_budget_from_db,
        clock: Callable[[], float] = time.monotonic,
        pause_loader: Callable[[], dict[str, PauseState]] | None = None,
    ):
        self._clock = clock  # seconds; tests pass a fake clock to step the refresh interval
        self._store = store
        self.refresh_seconds = (
            float(settings.GATEWAY_CONFIG_REFRESH_SECONDS)
            if refresh_seconds is None
            else float(refresh_seconds)
        )
        self._loader = loader
        self._team_loader = team_loader
        # the durable pauses: loaded with the rows of the database (a test's own loader: none)
        if pause_loader is None and loader is load_limits_from_db:
            pause_loader = load_pauses_from_db
        self._pause_loader = pause_loader
        self._refill = False  # pauses loaded: write them back into the store on the next refresh
        self.budget_seed = budget_seed
        self._limits: dict[str, ProviderLimits] = {}
        self._teams: dict[str, TeamLimits] = {}
        self._version: int | None = None
        self._dirty = False
        self._loaded_at = 0.0
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._refreshing: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = (
            weakref.WeakKeyDictionary()
        )
        self.reloads = 0  # how many times the rows were loaded (tests, dashboards)
        self.last_event_reload: float | None = None  # monotonic time of the last reload on an event
        if listen is None:
            listen = settings.GATEWAY_QUOTA_BACKEND == "redis" and bool(
                getattr(settings, "GATEWAY_CONFIG_PUBSUB", True)
            )
        self._listen = listen
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        register_listener(self)

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
            if cls._shared is not None:
                cls._shared.close()
            cls._shared = None

    @classmethod
    def forget_after_fork(cls) -> None:
        """In a forked child: the parent's source has a listener thread that does not exist here and
        a lock that thread may have held; the child builds its own source on first use."""
        cls._shared, cls._shared_lock = None, threading.Lock()

    # ---- change events -------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """A change was made in this process: the next get() reloads."""
        with self._lock:
            self._next_check = 0.0
            self._dirty = True

    def close(self) -> None:
        """Stop the listener thread (it is a daemon; tests and reset_shared call this)."""
        self._stop.set()

    def _start_listener(self) -> None:
        if not self._listen or self._listener is not None:
            return
        with self._lock:
            if self._listener is not None:
                return
            self._listener = threading.Thread(target=self._listen_loop, name="limits-listener", daemon=True)
        self._listener.start()

    def _listen_loop(self) -> None:
        """Subscribe to the config channel; reload on every announcement. Reconnects with backoff."""
        failures, resubscribe = 0, False  # connection failures in a row: the backoff's step
        while not self._stop.is_set():
            client = pubsub = None
            try:
                client = sync_redis(timeout=None)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(config_channel())
                failures = 0
                if resubscribe:  # a change may have been announced while we were disconnected
                    self.invalidate()
                resubscribe = True
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is None:
                        continue
                    version = _int_or_none(message.get("data"))
                    while (more := pubsub.get_message(timeout=0.0)) is not None:  # coalesce a burst
                        version = _int_or_none(more.get("data")) or version
                    try:
                        self._reload_now(version, event=True)
                    except Exception as exc:  # noqa: BLE001 - keep the subscription; the next get() retries
                        log.warning("config change listener: reload failed (%s); the next call reloads", exc)
                        self.invalidate()
            except Exception as exc:  # noqa: BLE001 - keep listening; the poll is the fallback meanwhile
                if self._stop.is_set():
                    break
                delay = capped_exponential(LISTEN_RETRY_MIN_SECONDS, LISTEN_RETRY_MAX_SECONDS, failures)
                failures += 1
                log.warning("config change listener: %s; retrying in %.1f s (polling meanwhile)", exc, delay)
                self._stop.wait(delay)
            finally:
                for closeable in (pubsub, client):
                    try:
                        if closeable is not None:
                            closeable.close()
                    except Exception:  # noqa: BLE001
                        pass

    def _reload_now(self, version: int | None, event: bool = False) -> None:
        limits = self._loader()
        teams = self._team_loader() if self._team_loader is not None else {}
        if self._pause_loader is not None:
            self.store.hold_pauses(self._pause_loader())
            self._refill = True
        if self._version is not None and version is not None and version != self._version:
            log.info(
                "provider config reloaded",
                extra={"event": "config_reloaded", "version": version, "on_event": event},
            )
        with self._lock:
            self._limits, self._teams = limits, teams
            if version is not None:
                self._version = version
            self._loaded_at = self._clock()
            self.reloads += 1
            if event:
                self.last_event_reload = self._loaded_at

    @property
    def store(self):
        if self._store is None:
            return get_quota_store()
        return self._store

    @property
    def version(self) -> int | None:
        return self._version

    async def refresh(self, force: bool = False) -> None:
        """Check the config version now (and reload if it moved, or if force)."""
        self._start_listener()
        now = self._clock()
        with self._lock:
            self._next_check = now + self.refresh_seconds
            dirty, self._dirty = self._dirty, False
        version = await self.store.config_version()
        stale = now - self._loaded_at >= MAX_AGE_SECONDS
        if force or dirty or stale or version != self._version or not self._loaded_at:
            await asyncio.to_thread(self._reload_now, version)
        if self._refill:
            self._refill = False
            if await self.store.refill_pauses():
                log.warning(
                    "provider pauses written back into the quota store from the database",
                    extra={"event": "provider_pauses_refilled"},
                )

    async def _maybe_refresh(self) -> None:
        if not self._loaded_at or self._clock() >= self._next_check:
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

    def peek(self, name: str, default: ProviderLimits) -> ProviderLimits:
        """The cached limits now (no refresh, no await): for callers that wait and re-ask the bucket."""
        return self._limits.get(name, default)

    def peek_team(self, name: str) -> TeamLimits | None:
        """The cached team limits now (no refresh, no await)."""
        return self._teams.get(name)

    async def team(self, name: str) -> TeamLimits | None:
        """The team's live limits; None if no such team (e.g. an engine run outside the gateway)."""
        if not name:
            return None
        await self._maybe_refresh()
        return self._teams.get(name)


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reset_quota_store() -> None:
    """Forget the process-wide store and LimitsSource.shared() (tests, or after settings change)."""
    forget_quota_store()
    LimitsSource.reset_shared()


@after_fork
def _forget_after_fork() -> None:
    """A forked child builds its own store and source: the parent's hold the parent's sockets, in-flight
    slots, budget caches and listener thread (docs/engine.md, "Processes and fork")."""
    forget_quota_store_after_fork()
    LimitsSource.forget_after_fork()

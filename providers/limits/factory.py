"""Choosing and caching the process-wide quota store."""

from __future__ import annotations

import asyncio
import threading

from django.conf import settings

from gateway_engine.quota.store import ComposedQuotaStore
from gateway_engine.quota.types import ProviderLimits, ProviderQuotaState

_store: ComposedQuotaStore | None = None
_store_lock = threading.Lock()


def build_quota_store() -> ComposedQuotaStore:
    """A new store as configured by settings (GATEWAY_QUOTA_BACKEND, REDIS_URL, GATEWAY_REDIS_PREFIX)."""
    backend = settings.GATEWAY_QUOTA_BACKEND
    if backend == "redis":
        from gateway_engine.quota.redis_store import RedisQuotaStore

        return RedisQuotaStore(
            settings.REDIS_URL,
            prefix=settings.GATEWAY_REDIS_PREFIX,
            global_max_in_flight=settings.GATEWAY_GLOBAL_MAX_IN_FLIGHT,
            cluster_max_in_flight=settings.GATEWAY_CLUSTER_MAX_IN_FLIGHT,
        )
    if backend == "local":
        from gateway_engine.quota.local import LocalQuotaStore

        return LocalQuotaStore(global_max_in_flight=settings.GATEWAY_GLOBAL_MAX_IN_FLIGHT)
    raise ValueError(f"settings.GATEWAY_QUOTA_BACKEND must be 'redis' or 'local', got {backend!r}")


def get_quota_store() -> ComposedQuotaStore:
    """The process-wide store. It may be used from any event loop: the Redis store keeps one client per
    running loop, so a Celery task calling asyncio.run() per chunk never reuses a dead loop's client.
    Call `await store.aclose()` before the loop ends to close that loop's connections."""
    global _store
    store = _store
    if store is None:
        with _store_lock:
            if _store is None:
                _store = build_quota_store()
            store = _store
    return store


def forget_quota_store() -> None:
    """Drop the process-wide store (the next get_quota_store() builds a new one). Callers use
    reset_quota_store(), which forgets LimitsSource.shared() too."""
    global _store
    with _store_lock:
        _store = None


def forget_quota_store_after_fork() -> None:
    """In a forked child: drop the parent's store and the lock a parent thread may have held."""
    global _store, _store_lock
    _store, _store_lock = None, threading.Lock()


def snapshot_all_sync(limits_list: list[ProviderLimits]) -> list[ProviderQuotaState]:
    """For Django views (sync): the quota state of each provider, in order. Runs its own short event
    loop; raises QuotaStoreUnavailable if Redis is down in shared mode."""

    async def run() -> list[ProviderQuotaState]:
        store = get_quota_store()
        try:
            return await store.snapshot_many(list(limits_list))
        finally:
            await store.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    # Called from inside a running loop (e.g. an async view): run in a helper thread.
    result: list = []
    error: list = []

    def target() -> None:
        try:
            result.append(asyncio.run(run()))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name="quota-snapshot")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def clear_pause_sync(limits: ProviderLimits) -> None:
    """For the admin (sync): end this provider's 429 pause now, for every worker. Raises
    QuotaStoreUnavailable if Redis is down in shared mode."""

    async def run() -> None:
        store = get_quota_store()
        try:
            await store.clear_pause(limits)
        finally:
            await store.aclose()

    asyncio.run(run())

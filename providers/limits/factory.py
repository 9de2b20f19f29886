"""Choosing and caching the process-wide quota store."""

from __future__ import annotations

import asyncio
import threading

from django.conf import settings

from gateway_engine.quota.store import ComposedQuotaStore
from gateway_engine.quota.types import PauseState, ProviderLimits, ProviderQuotaState

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


def run_with_store(work):
    """Run ``await work(store)`` on a short event loop of its own (for sync callers: Django views, the
    admin, commands, the metrics scrape), closing that loop's store connections after. Called from
    inside a running loop (e.g. an async view), it runs in a helper thread. QuotaStoreUnavailable (Redis
    down in shared mode) and any other error reach the caller."""

    async def run():
        store = get_quota_store()
        try:
            return await work(store)
        finally:
            await store.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    result: list = []
    error: list = []

    def target() -> None:
        try:
            result.append(asyncio.run(run()))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name="quota-store-call")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def snapshot_all_sync(limits_list: list[ProviderLimits]) -> list[ProviderQuotaState]:
    """For Django views (sync): the quota state of each provider, in order."""
    return run_with_store(lambda store: store.snapshot_many(list(limits_list)))


def clear_pause_sync(limits: ProviderLimits) -> None:
    """For the admin (sync): end this provider's 429 pause now, for every worker."""
    run_with_store(lambda store: store.clear_pause(limits))


def provider_pauses_sync(names: list[str]) -> dict[str, PauseState]:
    """For Django views and the metrics scrape (sync): the provider pause (quota exhausted, per-day
    quota; gateway_engine.quota.types.PauseState) of each named provider that has one. Raises
    QuotaStoreUnavailable if Redis is down in shared mode."""

    async def work(store) -> dict[str, PauseState]:
        found = {}
        for name in names:
            state = await store.provider_pause(name)
            if state is not None:
                found[name] = state
        return found

    return run_with_store(work) if names else {}


def lift_provider_pause_sync(name: str) -> PauseState | None:
    """For the admin and ``manage.py clear_provider_pause`` (sync): lift the provider's pause for every
    worker; returns the pause that was lifted (None: there was none). Not the 429 pause
    (clear_pause_sync). Raises QuotaStoreUnavailable if Redis is down in shared mode."""

    async def work(store) -> PauseState | None:
        state = await store.provider_pause(name)
        if not await store.lift_provider_pause(name):
            return None
        # lifted, but gone from the read a moment before (it expired between the two calls)
        return state or PauseState(provider=name, reason="expired", until_epoch=None)

    return run_with_store(work)

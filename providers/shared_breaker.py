"""The process-wide circuit breaker, chosen by settings (the Django side of gateway_engine.breaker).

RedisBreaker when ``settings.GATEWAY_QUOTA_BACKEND == "redis"`` (shared by every worker), else one
LocalBreaker per process (single-process mode).
"""

from __future__ import annotations

import threading

from django.conf import settings

from gateway_engine.breaker import LocalBreaker
from gateway_engine.breaker_redis import RedisBreaker
from gateway_site.forksafe import after_fork

_breaker: LocalBreaker | RedisBreaker | None = None
_breaker_lock = threading.Lock()


def get_breaker() -> LocalBreaker | RedisBreaker:
    global _breaker
    if _breaker is None:
        with _breaker_lock:
            if _breaker is None:
                if settings.GATEWAY_QUOTA_BACKEND == "redis":
                    _breaker = RedisBreaker(settings.REDIS_URL, prefix=settings.GATEWAY_REDIS_PREFIX)
                else:
                    _breaker = LocalBreaker()
    return _breaker


def reset_breaker() -> None:
    global _breaker
    with _breaker_lock:
        _breaker = None


@after_fork
def _forget_after_fork() -> None:
    """A forked child builds its own breaker (its Redis connections belong to the parent)."""
    global _breaker, _breaker_lock
    _breaker, _breaker_lock = None, threading.Lock()


def breaker_snapshot_sync(providers) -> dict[str, dict]:
    """For dashboards (sync): {provider: {state, consecutive_failures, window_requests, window_failures,
    open_remaining_ms, opened_count}}. Raises redis errors if Redis is down."""
    return {name: st.as_dict() for name, st in get_breaker().snapshot_sync(list(providers)).items()}

"""Config version: bumped whenever a provider or routing rule changes, so running workers reload.

In Redis mode the version is a shared counter that every worker polls cheaply (one GET at most every
GATEWAY_CONFIG_REFRESH_SECONDS); in single-process mode it is a module-level counter.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings

log = logging.getLogger(__name__)

_local_version = 0
_lock = threading.Lock()


def config_version_key() -> str:
    return f"{settings.GATEWAY_REDIS_PREFIX}config:version"


def _sync_redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def bump_config_version() -> int:
    """Announce a config change. Returns the new version."""
    global _local_version
    with _lock:
        _local_version += 1
        local = _local_version
    if settings.GATEWAY_QUOTA_BACKEND != "redis":
        return local
    try:
        client = _sync_redis()
        try:
            return int(client.incr(config_version_key()))
        finally:
            client.close()
    except Exception:  # the change is saved; workers still pick it up on their periodic refresh
        log.exception("could not publish the provider config version to Redis")
        return local


def current_config_version_local() -> int:
    """This process's counter (single-process mode)."""
    return _local_version


def current_config_version() -> int:
    if settings.GATEWAY_QUOTA_BACKEND != "redis":
        return _local_version
    client = _sync_redis()
    try:
        return int(client.get(config_version_key()) or 0)
    finally:
        client.close()

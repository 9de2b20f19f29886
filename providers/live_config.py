"""Config version and change events: bumped whenever a provider, routing rule or team changes, so running
workers reload their limits.

In Redis mode a change (on commit) INCRs a shared counter AND publishes the new version on a pub/sub
channel: every worker's LimitsSource listens on it and reloads at once (within milliseconds of the
commit); the cheap counter poll (one GET at most every GATEWAY_CONFIG_REFRESH_SECONDS) stays as the
fallback for a lost message. In single-process mode the counter is a module variable and the change
invalidates this process's LimitsSources directly.
"""

from __future__ import annotations

import logging
import weakref

from django.conf import settings

from gateway_engine.quota.config_version import bump_local_config_version
from gateway_engine.quota.types import CONFIG_VERSION_KEY
from gateway_site.redis import sync_redis

log = logging.getLogger(__name__)

# LimitsSources of this process, told about a change at once (single-process mode, and the process
# that made the change in Redis mode).
_listeners: weakref.WeakSet = weakref.WeakSet()


def config_version_key() -> str:
    return f"{settings.GATEWAY_REDIS_PREFIX}{CONFIG_VERSION_KEY}"


def config_channel() -> str:
    """The pub/sub channel a change is announced on (message: the new version)."""
    return f"{settings.GATEWAY_REDIS_PREFIX}config:changed"


def register_listener(source) -> None:
    """`source.invalidate()` is called after every change made in this process."""
    _listeners.add(source)


def _notify_local() -> None:
    for source in list(_listeners):
        try:
            source.invalidate()
        except Exception:  # noqa: BLE001 - one broken listener must not stop the others
            log.exception("config listener %r failed", source)


def bump_config_version() -> int:
    """Announce a config change (call on commit). Returns the new version."""
    local = bump_local_config_version()
    try:
        if settings.GATEWAY_QUOTA_BACKEND != "redis":
            return local
        try:
            with sync_redis() as client:
                version = int(client.incr(config_version_key()))
                client.publish(config_channel(), str(version))
                return version
        except Exception:  # the change is saved; workers still pick it up on their periodic refresh
            log.exception("could not publish the provider config version to Redis")
            return local
    finally:
        _notify_local()

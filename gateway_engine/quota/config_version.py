"""The shared provider-config version: whoever changes providers, routes or teams bumps it (the gateway:
providers.live_config), and a limits source reloads when it moved. The abstract base and both backends:
a process-wide counter (single-process mode) and a Redis key (every worker)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from .redis_conn import RedisConnection
from .types import CONFIG_VERSION_KEY

# Single-process mode's config version: a change to providers, routes or teams bumps it (the Django side,
# providers.live_config, calls bump_local_config_version) and LimitsSources compare it with what they hold.
_config_version = 0
_config_version_lock = threading.Lock()


def bump_local_config_version() -> int:
    global _config_version
    with _config_version_lock:
        _config_version += 1
        return _config_version


def local_config_version() -> int:
    return _config_version


class ConfigVersion(ABC):
    """Reads the shared provider-config version."""

    @abstractmethod
    async def config_version(self) -> int:
        """The version now (0 if never bumped)."""


class LocalConfigVersion(ConfigVersion):
    """This process's counter (bump_local_config_version)."""

    async def config_version(self) -> int:
        return local_config_version()


class RedisConfigVersion(ConfigVersion):
    """The ``{prefix}config:version`` key (the gateway's providers.live_config INCRs it)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def config_version(self) -> int:
        value = await self._conn.command("GET", f"{self._conn.prefix}{CONFIG_VERSION_KEY}")
        return int(value or 0)

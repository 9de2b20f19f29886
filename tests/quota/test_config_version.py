"""The shared provider-config version (gateway_engine/quota/config_version.py and its backends): a bump
is seen by the store at once, against the in-process store AND the Redis store (conftest.py). How the
gateway bumps it and reloads its limits: test_live_config.py and tests/limits/."""

from __future__ import annotations

from gateway_engine.quota.config_version import bump_local_config_version
from gateway_engine.quota.types import CONFIG_VERSION_KEY

from .conftest import run


def bump(store, redis_sync) -> int:
    """Bump the version as the gateway does (providers.live_config): the process counter or the key."""
    if store.backend == "local":
        return bump_local_config_version()
    return int(redis_sync.incr(store.prefix + CONFIG_VERSION_KEY))


def test_config_version_follows_every_bump(store, redis_sync):
    before = run(store, store.config_version)
    assert before >= 0
    first = bump(store, redis_sync)
    assert first == before + 1 and run(store, store.config_version) == first
    second = bump(store, redis_sync)
    assert second == first + 1 and run(store, store.config_version) == second


def test_a_fresh_redis_prefix_starts_at_zero(redis_store):
    assert run(redis_store, redis_store.config_version) == 0

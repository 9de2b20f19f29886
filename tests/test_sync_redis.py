"""One helper builds the Django side's synchronous Redis clients: gateway_site.redis.sync_redis."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway_site.redis import sync_redis

ROOT = Path(__file__).resolve().parent.parent
# the Django apps and the site; gateway_engine builds its clients from the URL it is handed (no Django)
PRODUCTION = ("providers", "batches", "observability", "dashboard", "openai_api", "gateway_site", "audit")
CLIENT_BUILDERS = re.compile(
    r"\bRedis\s*\.\s*from_url\s*\(|\bredis\s*\.\s*(?:Strict)?Redis\s*\(|\bredis\s*\.\s*from_url\s*\("
)


def test_no_production_module_builds_its_own_sync_client():
    offenders = []
    for package in PRODUCTION:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "gateway_site" / "redis.py":
                continue
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if CLIENT_BUILDERS.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not offenders, "use gateway_site.redis.sync_redis:\n" + "\n".join(offenders)


def test_the_guard_sees_a_client_being_built():
    assert CLIENT_BUILDERS.search("client = redis.Redis.from_url(url)")
    assert CLIENT_BUILDERS.search("redis.Redis(host='x')")
    assert not CLIENT_BUILDERS.search("client = sync_redis(timeout=3)")


def test_sync_redis_talks_to_redis_url_with_the_given_timeouts(settings, redis_sync):
    with sync_redis(timeout=3, connect_timeout=1) as client:
        assert client.ping()
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3, 1)
    with sync_redis(timeout=None) as listener:
        assert listener.connection_pool.connection_kwargs["socket_timeout"] is None


def test_no_redis_url_is_an_error_not_a_fallback(settings):
    settings.REDIS_URL = ""
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        sync_redis()

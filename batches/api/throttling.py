"""Per-API-key request throttling (DRF), rate from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["api_key"].

The rate is read per request (override_settings and env changes apply). With REDIS_URL set the
request history lives in Redis so every web process shares one budget per key; otherwise in the
process-local default cache.

Failure mode (decided): with REDIS_URL set and Redis unreachable the throttle fails CLOSED — every
API request answers ``503`` JSON with ``Retry-After`` (batches.api.exceptions) and nothing is stored.
It never falls back to a per-process count (a limit it cannot enforce cluster-wide is not enforced
half-way), and never lets requests through unthrottled.
"""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from .exceptions import DependencyUnavailable, dependency_of


@cache
def _redis_cache(url: str, prefix: str) -> BaseCache:
    from django.core.cache.backends.redis import RedisCache

    # short socket timeouts: a hung Redis answers 503 in about a second instead of hanging the request
    options = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}
    return RedisCache(url, {"KEY_PREFIX": prefix + "throttle", "OPTIONS": options})


def throttle_cache() -> BaseCache:
    if settings.REDIS_URL:
        return _redis_cache(settings.REDIS_URL, settings.GATEWAY_REDIS_PREFIX)
    return caches["default"]


class ApiKeyRateThrottle(SimpleRateThrottle):
    scope = "api_key"

    def __init__(self):
        self.cache = throttle_cache()
        super().__init__()

    def get_rate(self):
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return rate  # None (scope missing) disables throttling

    def allow_request(self, request, view):
        try:
            return super().allow_request(request, view)
        except Exception as exc:
            if dependency_of(exc) is None:
                raise
            raise DependencyUnavailable("redis", "rate limiter unavailable (Redis); retry later") from exc

    def get_cache_key(self, request, view):
        if request.auth is None:
            return None  # unauthenticated requests are refused before throttling matters
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}

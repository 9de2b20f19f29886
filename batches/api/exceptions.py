"""The API's exception handler: a dependency that is down answers a JSON 503 with Retry-After.

DRF's own handler turns APIExceptions into JSON; anything else would reach Django as an HTML 500.
Here an unreachable Redis (throttle, broker, quota store, breaker) or database becomes
``503 {"detail": "...", "dependency": "redis"|"database"}`` with ``Retry-After``; every other error
keeps DRF's behaviour. Requests are handled in one transaction per service call, so a 503 has stored
nothing (the throttle runs, and fails, before the view).
"""

from __future__ import annotations

import logging

from rest_framework.exceptions import APIException
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


class DependencyUnavailable(APIException):
    status_code = 503
    default_detail = "service temporarily unavailable; retry later"
    default_code = "unavailable"

    def __init__(self, dependency: str, detail: str | None = None):
        super().__init__(detail or f"{dependency} is unavailable; retry in {RETRY_AFTER_SECONDS} s")
        self.dependency = dependency
        self.wait = RETRY_AFTER_SECONDS  # DRF's handler turns this into Retry-After


def _redis_errors() -> tuple[type[BaseException], ...]:
    from kombu.exceptions import OperationalError as KombuOperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from gateway_engine.breaker import BreakerUnavailable
    from gateway_engine.quota.types import QuotaStoreUnavailable

    return (
        RedisConnectionError,
        RedisTimeoutError,
        KombuOperationalError,
        QuotaStoreUnavailable,
        BreakerUnavailable,
    )


def dependency_of(exc: BaseException) -> str | None:
    """'redis' or 'database' when ``exc`` means that dependency cannot be reached, else None."""
    from django.db import InterfaceError
    from django.db import OperationalError as DbOperationalError

    if isinstance(exc, DependencyUnavailable):
        return exc.dependency
    if isinstance(exc, _redis_errors()):
        return "redis"
    if isinstance(exc, (DbOperationalError, InterfaceError)):
        return "database"
    return None


def exception_handler(exc, context):
    dependency = dependency_of(exc)
    if dependency is not None and not isinstance(exc, DependencyUnavailable):
        log.warning("API request failed: %s unavailable (%s: %s)", dependency, type(exc).__name__, exc)
        exc = DependencyUnavailable(dependency)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, DependencyUnavailable):
        response.data = {"detail": str(exc.detail), "dependency": exc.dependency}
    return response

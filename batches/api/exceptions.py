"""The API's exception handler (``/api/``): every ``ApplicationError`` answered in one place.

DRF's own handler turns APIExceptions into JSON; anything else would reach Django as an HTML 500.
Here:

* an unreachable Redis (throttle, broker, quota store, breaker) or database becomes
  ``503 {"detail": "...", "dependency": "redis"|"database"}`` with ``Retry-After``
  (``DependencyUnavailable``); requests are handled in one transaction per service call, so a 503 has
  stored nothing (the throttle runs, and fails, before the view);
* any other ``ApplicationError`` answers its ``status`` with its ``as_dict()`` body (the errors list
  ``{"errors": [...], "error_count": n}`` for bad input, ``{"detail": ...}`` otherwise) and its
  ``response_headers()`` (``Retry-After``);
* every other error keeps DRF's behaviour.

Views raise; they never turn an error into a Response themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import InterfaceError
from django.db import OperationalError as DbOperationalError
from kombu.exceptions import OperationalError as KombuOperationalError
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from gateway_engine.breaker import BreakerUnavailable
from gateway_engine.errors import ApplicationError, Unavailable
from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_engine.redis_errors import REDIS_ERRORS

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5

# what "Redis cannot be reached" looks like by the time it reaches a view
_REDIS_DOWN = (*REDIS_ERRORS, KombuOperationalError, QuotaStoreUnavailable, BreakerUnavailable)


class InvalidQuery(ApplicationError):
    """400: query parameters a serializer refused, one error per field and message."""

    code = "invalid_query"

    def __init__(self, serializer_errors: Mapping[str, Any]):
        self.errors = [
            {"index": None, "field": name, "message": str(message)}
            for name, messages in serializer_errors.items()
            for message in (messages if isinstance(messages, list) else [messages])
        ]
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in self.errors))

    def as_dict(self) -> dict[str, Any]:
        return {"errors": self.errors, "error_count": len(self.errors)}


class DependencyUnavailable(Unavailable, APIException):
    """503 naming the dependency (``redis`` or ``database``) that cannot be reached. Also an
    APIException, so that DRF's authentication treats it as every refused request (the request's user
    becomes anonymous) when the key check's or the throttle's Redis is down."""

    status_code = 503
    default_code = "unavailable"

    def __init__(self, dependency: str, detail: str | None = None):
        message = detail or f"{dependency} is unavailable; retry in {RETRY_AFTER_SECONDS} s"
        super().__init__(message, retry_after=RETRY_AFTER_SECONDS, details={"dependency": dependency})
        self.dependency = dependency


def dependency_of(exc: BaseException) -> str | None:
    """'redis' or 'database' when ``exc`` means that dependency cannot be reached, else None."""
    if isinstance(exc, DependencyUnavailable):
        return exc.dependency
    if isinstance(exc, _REDIS_DOWN):
        return "redis"
    if isinstance(exc, (DbOperationalError, InterfaceError)):
        return "database"
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    dependency = dependency_of(exc)
    if dependency is not None and not isinstance(exc, DependencyUnavailable):
        log.warning("API request failed: %s unavailable (%s: %s)", dependency, type(exc).__name__, exc)
        exc = DependencyUnavailable(dependency)
    if isinstance(exc, ApplicationError):
        set_rollback()
        return Response(exc.as_dict(), status=exc.status, headers=exc.response_headers() or None)
    return drf_exception_handler(exc, context)

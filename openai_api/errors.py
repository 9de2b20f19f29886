"""Errors on `/v1/` in OpenAI's shape, so the openai SDK raises its usual exception classes:
{"error": {"message", "type", "param", "code"}} with 400/401/404/409/413/415/429/503.

``openai_exception_handler`` is the one place that maps errors here (the OpenAI views use it instead
of DRF's): an ``OpenAIError`` with its own type and code, any other ``ApplicationError`` by its
status (``param`` is its ``field``), DRF's exceptions (authentication, throttling, 404, ...) by kind,
and a raw "Redis / the database cannot be reached" error past the throttle (``dependency_of``) as 503
``dependency_unavailable`` with Retry-After, never Django's 500.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from batches.api.exceptions import RETRY_AFTER_SECONDS, DependencyUnavailable, dependency_of
from gateway_engine.errors import ApplicationError

log = logging.getLogger(__name__)

# DRF exception → (OpenAI error type, code)
KINDS: list[tuple[type[exceptions.APIException], str, str | None]] = [
    (exceptions.NotAuthenticated, "invalid_request_error", "invalid_api_key"),
    (exceptions.AuthenticationFailed, "invalid_request_error", "invalid_api_key"),
    (exceptions.Throttled, "rate_limit_error", "rate_limit_exceeded"),
    (exceptions.NotFound, "invalid_request_error", "not_found"),
    (exceptions.MethodNotAllowed, "invalid_request_error", "method_not_allowed"),
    (exceptions.UnsupportedMediaType, "invalid_request_error", "unsupported_media_type"),
    (exceptions.PermissionDenied, "invalid_request_error", "permission_denied"),
]


class OpenAIError(ApplicationError):
    """An error answered in OpenAI's shape {"error": {"message", "type", "param", "code"}}: ``field`` is
    its ``param``, ``openai_code`` its ``code`` (None: OpenAI sends none), ``headers`` extra headers."""

    code = "openai_error"

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message, field=param, code=code, status=status_code)
        self.openai_code = code
        self.type = type
        self.headers = dict(headers or {})

    def response_headers(self) -> dict[str, str]:
        return {**super().response_headers(), **self.headers}


def error_body(message: str, *, type: str = "invalid_request_error", param=None, code=None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def openai_kind(exc: ApplicationError) -> tuple[str, str | None]:
    """OpenAI's (type, code) for an ApplicationError."""
    if isinstance(exc, OpenAIError):
        return exc.type, exc.openai_code
    if isinstance(exc, DependencyUnavailable):  # the throttle's or the key check's Redis is down
        return "invalid_request_error", None
    if exc.status == 429:
        return "rate_limit_error", exc.code
    return ("server_error" if exc.status >= 500 else "invalid_request_error"), exc.code


def _message(detail) -> tuple[str, str | None]:
    """First message of a DRF error detail and the field it belongs to."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            message, _ = _message(value)
            return message, str(key)
        return "invalid request", None
    if isinstance(detail, list):
        return (_message(detail[0])[0] if detail else "invalid request"), None
    return str(detail), None


def _drf_error_response(exc: exceptions.APIException) -> Response:
    type_, code = "invalid_request_error", None
    for cls, kind, kind_code in KINDS:
        if isinstance(exc, cls):
            type_, code = kind, kind_code
            break
    message, param = _message(exc.detail)
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    status = exc.status_code
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        status = 401
    return Response(error_body(message, type=type_, param=param, code=code), status=status, headers=headers)


def openai_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    dependency = None if isinstance(exc, ApplicationError) else dependency_of(exc)
    if dependency is not None:
        log.warning("/v1 request failed: %s unavailable (%s: %s)", dependency, type(exc).__name__, exc)
        exc = OpenAIError(503, f"{dependency} is unavailable; retry in {RETRY_AFTER_SECONDS} s",
                          type="server_error", code="dependency_unavailable",
                          headers={"Retry-After": str(RETRY_AFTER_SECONDS)})  # fmt: skip
    if isinstance(exc, ApplicationError):
        type_, code = openai_kind(exc)
        body = error_body(exc.message, type=type_, param=exc.field, code=code)
        return Response(body, status=exc.status, headers=exc.response_headers() or None)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None  # a real server error: Django's 500
    return _drf_error_response(exc)

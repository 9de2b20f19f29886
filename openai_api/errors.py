"""Errors on `/v1/` in OpenAI's shape, so the openai SDK raises its usual exception classes:
{"error": {"message", "type", "param", "code"}} with 400/401/404/409/413/415/429."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from .services import OpenAIError

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


def error_body(message: str, *, type: str = "invalid_request_error", param=None, code=None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


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


def openai_exception_handler(exc, context):
    if isinstance(exc, OpenAIError):
        body = error_body(exc.message, type=exc.type, param=exc.param, code=exc.code)
        return Response(body, status=exc.status_code, headers=exc.headers or None)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None  # a real server error: Django's 500
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

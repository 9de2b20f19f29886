"""JSON answers for paths no view matches under /api/ and /v1/, and JSON 404/500 handlers there.

The REST API and the OpenAI-compatible surface are read by programs: an unknown path, a trailing
slash a client added, or a malformed batch id must answer JSON with the right status, never Django's
HTML page. Two shapes (docs/api.md):

* ``/api/...``: the native ``{"detail": "..."}``;
* ``/v1/...``: OpenAI's ``{"error": {"message", "type", "param", "code"}}``.

A path that differs from a real endpoint only by a trailing slash is served by that endpoint directly
(no redirect: a redirect would drop a POST body).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt

API_PREFIX = "/api/"
OPENAI_PREFIX = "/v1/"


def is_openai_path(path: str) -> bool:
    return path == OPENAI_PREFIX.rstrip("/") or path.startswith(OPENAI_PREFIX)


def is_api_path(path: str) -> bool:
    return path == API_PREFIX.rstrip("/") or path.startswith(API_PREFIX)


def json_error(request: HttpRequest, status: int, message: str, code: str | None = None) -> JsonResponse:
    """An error in the shape the path's surface uses (OpenAI's under /v1/, the native one elsewhere)."""
    if is_openai_path(request.path_info):
        error_type = "invalid_request_error" if status < 500 else "server_error"
        body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
        return JsonResponse(body, status=status)
    return JsonResponse({"detail": message}, status=status)


def _slash_twin(request: HttpRequest):
    """The real view the path names when its trailing slash is dropped (or added), else None."""
    path = request.path_info
    twin = path.rstrip("/") if path.endswith("/") else path + "/"
    if not twin or twin == path:
        return None
    try:
        match = resolve(twin)
    except Resolver404:
        return None
    if getattr(match.func, "is_path_fallback", False):
        return None
    return match


@csrf_exempt
def path_fallback(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    """The last URL pattern under /api/ and /v1/: serve the slash twin, or answer a JSON 404."""
    match = _slash_twin(request)
    if match is not None:
        request.resolver_match = match
        return match.func(request, *match.args, **match.kwargs)
    message = f"Invalid URL ({request.method} {request.path_info}): no such endpoint"
    if is_api_path(request.path_info):
        message += "; see /api/docs/"
    return json_error(request, 404, message, code="unknown_url")


path_fallback.is_path_fallback = True  # type: ignore[attr-defined]


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request.path_info) or is_openai_path(request.path_info):
        return json_error(request, 404, "not found", code="not_found")
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path_info) or is_openai_path(request.path_info):
        return json_error(request, 500, "internal server error; the gateway's log has the details")
    from django.views.defaults import server_error

    return server_error(request)

"""Host handling in front of Django's own check (``request.get_host()`` against ALLOWED_HOSTS).

* ``/healthz``, ``/readyz`` and ``/metrics`` are probes: Prometheus scrapes ``web:8000``, a Kubernetes
  probe uses the pod IP. They answer whatever the ``Host`` header, served here before any middleware
  that reads the host (CommonMiddleware, the SSL redirect: a probe reaches the process over plain HTTP
  behind a TLS proxy too). ``/metrics`` keeps its token check (its view).
* Under ``/api/`` and ``/v1/`` an unexpected ``Host`` answers a JSON 400 in that surface's error shape
  (``gateway_site.errors.json_error``), not Django's HTML "Bad Request (400)"; logged as Django does.
* Every other path is untouched: the admin and the dashboards keep Django's check and its answer.

ALLOWED_HOSTS is not weakened: nothing but the three probe views runs for a host it does not allow.
"""

from __future__ import annotations

import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost

from observability import views as ops

from .errors import is_api_path, is_openai_path, json_error

PROBES = {"/healthz": ops.healthz, "/readyz": ops.readyz, "/metrics": ops.metrics}
MAX_SHOWN_HOST = 200
security_log = logging.getLogger("django.security.DisallowedHost")


class HostMiddleware:
    """Place it before SecurityMiddleware and CommonMiddleware (right after the request id)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        refused = self._refused(request)
        return refused if refused is not None else self.get_response(request)

    async def _acall(self, request):
        path = request.path_info
        if path in PROBES:  # the probes are sync views (database, Redis checks): in a thread
            return await sync_to_async(self._refused)(request)
        refused = self._refused(request)
        return refused if refused is not None else await self.get_response(request)

    def _refused(self, request):
        """A probe's answer, or the JSON 400 of a disallowed Host on /api/ and /v1/, else None."""
        path = request.path_info
        probe = PROBES.get(path)
        if probe is not None:
            return probe(request)
        if is_api_path(path) or is_openai_path(path):
            try:
                request.get_host()
            except DisallowedHost as exc:
                security_log.error(str(exc), extra={"status_code": 400, "request": request})
                return json_error(request, 400, _message(request), code="invalid_host")
        return None


def _message(request) -> str:
    raw = _raw_host(request)
    shown = raw if len(raw) <= MAX_SHOWN_HOST else raw[:MAX_SHOWN_HOST] + "…"
    return (
        f"Invalid Host header {shown!r}: this gateway does not serve that host name "
        "(its operators list the allowed ones in DJANGO_ALLOWED_HOSTS)"
    )


def _raw_host(request) -> str:
    """The host value ``get_host()`` checked (X-Forwarded-Host when trusted), as Django picks it."""
    meta = request.META
    if settings.USE_X_FORWARDED_HOST and "HTTP_X_FORWARDED_HOST" in meta:
        return meta["HTTP_X_FORWARDED_HOST"]
    if "HTTP_HOST" in meta:
        return meta["HTTP_HOST"]
    return f"{meta.get('SERVER_NAME', '')}:{meta.get('SERVER_PORT', '')}"

"""How the ASGI application splits the site (gateway_site.asgi): the interactive lane's async views on a
Django ASGI handler with an async-only middleware chain, every other path on the WSGI application in a
thread pool (a2wsgi) — measured in docs/benchmarks.md ("ASGI or WSGI for the rest of the site").

Why not Django's ASGI handler for everything: under ASGI every ``MiddlewareMixin`` middleware
(security, sessions, common, CSRF, auth, messages, clickjacking, CSP) runs its hooks through
``sync_to_async(thread_sensitive=True)`` — one shared thread for the whole process, two hops per
middleware per request — which more than halved the requests per second of the sync views and of the
async views behind them. The interactive paths need none of it (API keys, JSON, no sessions or forms);
the rest keeps exactly the WSGI stack it always had.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

# the paths the async handler serves; everything else goes to the WSGI application
INTERACTIVE_PATHS = frozenset(
    {"/v1/chat/completions", "/v1/models", "/v1/responses", "/v1/messages", "/v1/embeddings"}
)

# async-capable middleware only (no thread hop per request): the request id, the Host check, and the
# response headers the security middleware would add to an API answer
INTERACTIVE_MIDDLEWARE = [
    "observability.logs.RequestIdMiddleware",
    "gateway_site.hosts.HostMiddleware",
    "gateway_site.asgi_routing.ApiHeadersMiddleware",
]


class InteractiveASGIHandler(ASGIHandler):
    """Django's ASGI handler with INTERACTIVE_MIDDLEWARE instead of settings.MIDDLEWARE."""

    def load_middleware(self, is_async: bool = False) -> None:
        saved = settings.MIDDLEWARE
        settings.MIDDLEWARE = INTERACTIVE_MIDDLEWARE  # read once, here, at start-up (one thread)
        try:
            super().load_middleware(is_async=is_async)
        finally:
            settings.MIDDLEWARE = saved


class ApiHeadersMiddleware:
    """``X-Content-Type-Options: nosniff`` and ``Referrer-Policy`` as SecurityMiddleware sets them, and
    ``Cache-Control: no-store`` on API answers (async only)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        from asgiref.sync import markcoroutinefunction

        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request):
        response = await self.get_response(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", str(settings.SECURE_REFERRER_POLICY or "same-origin"))
        response.headers.setdefault("Cache-Control", "no-store")
        return response

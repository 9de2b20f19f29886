"""The ASGI application (``uvicorn gateway_site.asgi:application --workers N``: docs/operations.md). One
port serves the whole site: the interactive lane (``/v1/chat/completions``, ``/v1/models``) as async
views — thousands of waiting or streaming calls without a thread each —, every other path through the
WSGI application on a thread pool (GATEWAY_ASGI_THREADS threads per process), exactly as gunicorn would
run it (asgi_routing.py says why, docs/benchmarks.md measures it). Production settings unless told
otherwise; database connections come from psycopg's pool (GATEWAY_ASGI, gateway_site/settings/base.py).

Every HTTP request passes gateway_site/ingress.py first: an API key is checked before the body is read,
bodies are capped (small before authentication) and must arrive in time.

The ASGI lifespan is handled here (Django has none): at shutdown the interactive call log is flushed and
the lane's provider connections and quota-store clients are closed."""

import logging
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.production")
os.environ["GATEWAY_ASGI"] = "1"

import django  # noqa: E402

django.setup(set_prefix=False)

from a2wsgi import WSGIMiddleware  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from gateway_site.asgi_interactive import interactive_app  # noqa: E402
from gateway_site.asgi_routing import INTERACTIVE_PATHS, InteractiveASGIHandler  # noqa: E402
from gateway_site.ingress import guarded  # noqa: E402
from gateway_site.proxy_check import proxy_headers_warning  # noqa: E402

# the interactive paths: a plain ASGI callable (asgi_interactive.py); GATEWAY_ASGI_INTERACTIVE=django runs
# them on Django's ASGI handler with the async-only middleware chain instead (to measure the difference)
interactive_application = (
    InteractiveASGIHandler() if os.environ.get("GATEWAY_ASGI_INTERACTIVE") == "django" else interactive_app
)
if settings.GATEWAY_ASGI_SYNC_PATHS == "django":  # Django's ASGI handler for everything (measured only)
    from django.core.handlers.asgi import ASGIHandler

    site_application = ASGIHandler()
else:
    site_application = WSGIMiddleware(get_wsgi_application(), workers=int(settings.GATEWAY_ASGI_THREADS))
log = logging.getLogger("gateway_site.asgi")


async def _shutdown() -> None:
    from interactive.lane import close_lane
    from interactive.records import call_log
    from providers.limits import get_quota_store

    try:
        await call_log().flush()
    finally:
        await close_lane()
        await get_quota_store().aclose()


async def application(scope, receive, send):
    kind = scope["type"]
    path = scope.get("path", "")
    if kind == "http" and path.rstrip("/") in INTERACTIVE_PATHS:
        if path.endswith("/"):  # a trailing slash answers like the canonical path everywhere (docs/api.md)
            scope = {**scope, "path": path.rstrip("/"), "raw_path": path.rstrip("/").encode()}
        await guarded(interactive_application, scope, receive, send, key_required=True)
    elif kind == "http":  # the key before the body, body caps and timeouts (gateway_site/ingress.py)
        await guarded(site_application, scope, receive, send)
    elif kind != "lifespan":
        await site_application(scope, receive, send)
    else:
        await _lifespan(receive, send)


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            for warning in getattr(settings, "GATEWAY_START_WARNINGS", ()):
                log.warning(warning)
            proxies = proxy_headers_warning(sys._getframe())  # the server's own X-Forwarded-For rewriting
            if proxies:
                log.warning(proxies)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await _shutdown()
            except Exception:  # noqa: BLE001 - report, and still let the server stop
                log.exception("interactive lane shutdown failed")
            await send({"type": "lifespan.shutdown.complete"})
            return

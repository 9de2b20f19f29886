"""The ASGI application (``uvicorn gateway_site.asgi:application``, or gunicorn with uvicorn workers:
docs/operations.md). It serves every path — the interactive lane's async views (``/v1/chat/completions``,
``/v1/models``) without a thread per call, the rest of the site as Django runs sync views under ASGI —
so one port serves both. Production settings unless told otherwise; database connections come from
psycopg's pool (GATEWAY_ASGI, gateway_site/settings/base.py).

The ASGI lifespan is handled here (Django has none): at shutdown the interactive call log is flushed
and the lane's provider connections and quota-store clients are closed."""

import logging
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.production")
os.environ["GATEWAY_ASGI"] = "1"

from django.core.asgi import get_asgi_application  # noqa: E402

django_application = get_asgi_application()
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
    if scope["type"] != "lifespan":
        await django_application(scope, receive, send)
        return
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            for warning in _start_warnings():
                log.warning(warning)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await _shutdown()
            except Exception:  # noqa: BLE001 - report, and still let the server stop
                log.exception("interactive lane shutdown failed")
            await send({"type": "lifespan.shutdown.complete"})
            return


def _start_warnings():
    from django.conf import settings

    return list(getattr(settings, "GATEWAY_START_WARNINGS", ()))

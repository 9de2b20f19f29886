"""The web app (gunicorn gateway_site.wsgi:application). Production settings unless told otherwise.

Start-up warnings of the settings (GATEWAY_START_WARNINGS, e.g. plain HTTP) are logged here, once per
web process start, not by every management command or worker that loads the same settings."""

import logging
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.production")

application = get_wsgi_application()


def _log_start_warnings() -> None:
    from django.conf import settings

    for message in getattr(settings, "GATEWAY_START_WARNINGS", ()):
        logging.getLogger("gateway_site.settings").warning(message)


_log_start_warnings()

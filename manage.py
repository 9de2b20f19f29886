#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.local")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    from observability.logs import mark_command_line

    mark_command_line()  # logs: human-readable on a terminal unless GATEWAY_LOG_FORMAT says otherwise
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        if settings.configured:  # raised by a command, not by the settings: keep Django's traceback
            raise
        # the environment is wrong (the settings refused to load): the one sentence that says why
        sys.exit(f"ImproperlyConfigured: {exc}")


if __name__ == "__main__":
    main()

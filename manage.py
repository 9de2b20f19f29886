#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.local")
    from django.core.management import execute_from_command_line

    from observability.logs import mark_command_line

    mark_command_line()  # logs: human-readable on a terminal unless GATEWAY_LOG_FORMAT says otherwise
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

"""Celery beat entry point for retention (thin: calls the service)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from .retention import purge_old_data


@shared_task(name="observability.purge_old_data", ignore_result=True)
def purge_old_data_task() -> dict:
    # retention off (0): still deletes the /v1 files past their expires_at
    return purge_old_data(int(settings.GATEWAY_RETENTION_DAYS)).purged

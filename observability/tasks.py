"""Celery beat entry point for retention (thin: calls the service)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from .retention import purge_old_data


@shared_task(name="observability.purge_old_data", ignore_result=True)
def purge_old_data_task() -> dict:
    days = int(settings.GATEWAY_RETENTION_DAYS)
    if days < 1:
        return {}
    return purge_old_data(days).purged

"""The Celery application. Start a worker with: celery -A gateway_site worker"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.production")

app = Celery("gateway_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

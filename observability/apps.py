from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        from . import celery_hooks, tracing

        celery_hooks.connect()
        tracing.configure_from_env()

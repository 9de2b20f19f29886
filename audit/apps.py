from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Configuration history"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals

        signals.connect()

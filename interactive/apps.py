from django.apps import AppConfig


class InteractiveConfig(AppConfig):
    """The interactive lane: ``/v1/chat/completions`` and ``/v1/models`` (issue #22, docs/interactive.md)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "interactive"
    verbose_name = "interactive calls"

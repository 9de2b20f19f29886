from django.apps import AppConfig


class OpenaiApiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "openai_api"
    verbose_name = "OpenAI-compatible files and batches"

    def ready(self) -> None:
        from observability.retention import register_purger

        from .retention import purge_files

        register_purger("files", purge_files)

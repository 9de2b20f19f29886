from django.apps import AppConfig


class OpenaiApiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "openai_api"
    verbose_name = "OpenAI-compatible files and batches"

    def ready(self) -> None:
        from webhooks import events

        from . import selectors

        # a /v1 batch's webhook event names it by the "batch_…" id the openai SDK retrieves
        events.register_public_id(selectors.openai_batch_id)

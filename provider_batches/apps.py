from django.apps import AppConfig


class ProviderBatchesConfig(AppConfig):
    """The provider-batch route (issue #23): its due work is driven by every reconciler pass."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "provider_batches"
    verbose_name = "provider batches"

    def ready(self) -> None:
        from batches.execution import due as due_work

        from .due import QUEUE

        due_work.register(QUEUE)

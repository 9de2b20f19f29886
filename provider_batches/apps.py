from django.apps import AppConfig


class ProviderBatchesConfig(AppConfig):
    """The provider-batch route (issue #23): its due work is driven by every reconciler pass."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "provider_batches"
    verbose_name = "provider batches"

    def ready(self) -> None:
        from batches import signals
        from batches.execution import due as due_work

        from .due import NAME, QUEUE

        due_work.register(QUEUE)

        def started(sender, batch, **kwargs) -> None:
            # a batch just started may have items for a provider batch: group them now, not a pass later
            from batches.models import BatchItem, ServedVia

            if BatchItem.objects.filter(batch_id=batch.id, served_via=ServedVia.PROVIDER_BATCH).exists():
                due_work.kick_now(NAME)

        signals.batch_started.connect(started, dispatch_uid="provider_batches.started", weak=False)

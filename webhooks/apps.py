from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Signed events when a batch ends (issue #26, docs/webhooks.md)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "webhooks"
    verbose_name = "webhooks"

    def ready(self) -> None:
        from batches import signals
        from batches.execution import due

        from . import events, services, sweep, tasks

        signals.batch_finished.connect(events.on_batch_finished, dispatch_uid="webhooks.batch_finished")
        due.register(due.DueQueue(name=services.QUEUE, next_due=sweep.next_due, kick=tasks.kick))

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Configuration history"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from batches.signals import batch_action
        from providers.signals import provider_action

        from . import actions, signals

        signals.connect()
        batch_action.connect(actions.on_batch_action, dispatch_uid="audit.batch_action")
        # the same recorder: a provider's pause set by the engine or cleared by an operator (providers.pauses)
        provider_action.connect(actions.on_batch_action, dispatch_uid="audit.provider_action")

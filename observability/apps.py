import logging

from django.apps import AppConfig

log = logging.getLogger("observability.metrics")


class ObservabilityConfig(AppConfig):
    name = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        from batches import signals
        from batches.execution import observers

        from . import celery_hooks, events, tracing
        from .engine import engine_observer
        from .moves import record_moves
        from .served import record_served_results

        celery_hooks.connect()
        signals.batch_started.connect(events.on_batch_started, dispatch_uid="observability.batch_started")
        signals.batch_finished.connect(events.on_batch_finished, dispatch_uid="observability.batch_finished")
        observers.install(engine_observer)
        observers.install_served_recorder(record_served_results)
        observers.install_move_recorder(record_moves)
        tracing.configure_from_env()
        warn_if_worker_metrics_invisible()


def warn_if_worker_metrics_invisible() -> None:
    """Start-up warning of every process (web, worker, command) in multi-process mode whose metrics
    cannot be summed with the others' (no multiprocess directory), or whose directory has a problem."""
    from django.conf import settings

    from .health import metrics_gap_reason, shared_mode

    if shared_mode() and not settings.GATEWAY_METRICS_DIR:
        log.warning(
            "worker metrics are not collected: %s. This process's metrics are not shared with the host's "
            "other web and worker processes; /metrics reports gateway_worker_metrics_collected 0",
            metrics_gap_reason(),
            extra={"event": "worker_metrics_not_collected"},
        )
    elif settings.GATEWAY_METRICS_DIR and getattr(settings, "GATEWAY_METRICS_DIR_PROBLEM", ""):
        log.warning(
            "metrics directory %s: %s",
            settings.GATEWAY_METRICS_DIR,
            settings.GATEWAY_METRICS_DIR_PROBLEM,
            extra={"event": "metrics_dir_problem"},
        )

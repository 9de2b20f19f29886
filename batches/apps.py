from django.apps import AppConfig


class BatchesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "batches"
    verbose_name = "Batches"

    def ready(self) -> None:
        # teams sits below batches and providers: its readers of a team's usage (the Team admin, the
        # budget ledger's re-seed) get the counters from here (teams/usage.py)
        from providers.limits.budgets import budget_usage
        from teams.usage import TeamUsage, register_team_usage

        from . import queue_limits
        from .budget import used_tokens_from_db

        register_team_usage(
            TeamUsage(
                used_tokens=used_tokens_from_db, budget_usage=budget_usage, queue_usage=queue_limits.usage
            )
        )

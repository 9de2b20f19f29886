from django.apps import AppConfig


class BatchesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "batches"
    verbose_name = "Batches"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .operators import ensure_operator_group

        # the operator group again where a flush or a deletion removed it (batches/operators.py)
        post_migrate.connect(ensure_operator_group, sender=self, dispatch_uid="batches.operator_group")
        # teams sits below batches and providers: its readers of a team's usage (the Team admin, the
        # budget ledger's re-seed) get the counters from here (teams/usage.py)
        from providers.limits.budgets import budget_usage, rate_usage
        from teams.usage import TeamUsage, register_team_usage

        from .budget import used_tokens_from_db
        from .submission import queue_limits

        register_team_usage(
            TeamUsage(
                used_tokens=used_tokens_from_db,
                budget_usage=budget_usage,
                queue_usage=queue_limits.usage,
                rate_usage=rate_usage,
            )
        )

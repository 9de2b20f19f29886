"""Team token budgets, the batches side: the submission check and the database count that re-seeds a
lost ledger (registered as TeamUsage.used_tokens in apps.py).

Reading and resetting the shared ledger from sync code: providers/limits/budgets.py; a Team row as
TeamLimits: teams/limits.py. See docs/quota.md "Team budgets".
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from django.conf import settings
from django.db.models import F, Sum
from django.db.models.functions import Coalesce

from gateway_engine.items import estimate_tokens
from gateway_engine.quota import BudgetExceeded
from providers.limits.budgets import budget_usage
from teams.models import Team

from .models import Batch, BatchItem, TeamUsageDaily


def estimate_payload_tokens(payloads: Iterable[dict]) -> int:
    """The engine's estimate (prompt chars / 4 + max_tokens or GATEWAY_DEFAULT_MAX_TOKENS), summed."""
    default = int(settings.GATEWAY_DEFAULT_MAX_TOKENS)
    return sum(estimate_tokens(p.get("messages") or [], p.get("params") or {}, default) for p in payloads)


def budget_refusal(team: Team, tokens: int) -> BudgetExceeded | None:
    """None if the team's remaining day and month budgets can take `tokens` more; else why not
    (the first period without room: the day before the month). Reads the shared ledger (seeding it
    from the database if it is missing). Raises QuotaStoreUnavailable if Redis is down."""
    if team.daily_token_budget is None and team.monthly_token_budget is None:
        return None
    for period, limit, used in budget_usage(team):
        if limit is not None and used + tokens > limit:
            return BudgetExceeded(team.name, period, int(limit), int(used), int(tokens))
    return None


def used_tokens_from_db(team: str, period: str, suffix: str) -> int:
    """Tokens the team used in the UTC day (``d:YYYY-MM-DD``) or month (``m:YYYY-MM``), from the
    database: TeamUsageDaily rows of finished batches in that period, plus the tokens of finished items
    of batches not finalized yet (finalizing folds them into TeamUsageDaily) whose items finished in
    that period. Tokens of items in flight at that moment are not included: after a ledger loss the
    ledger can undercount by at most the tokens in flight then (see docs/quota.md)."""
    kind, stamp = suffix.split(":", 1)
    if kind == "d":
        day = date.fromisoformat(stamp)
        usage_filter = {"day": day}
        item_filter = {"finished_at__date": day}
    else:
        year, month = (int(x) for x in stamp.split("-"))
        usage_filter = {"day__year": year, "day__month": month}
        item_filter = {"finished_at__year": year, "finished_at__month": month}
    folded = TeamUsageDaily.objects.filter(team__name=team, **usage_filter).aggregate(
        n=Coalesce(Sum(F("prompt_tokens") + F("completion_tokens") + F("wasted_tokens")), 0)
    )["n"]
    open_batches = Batch.objects.filter(team__name=team, completed_at__isnull=True).values("id")
    pending = BatchItem.objects.filter(
        batch_id__in=open_batches, finished_at__isnull=False, **item_filter
    ).aggregate(n=Coalesce(Sum(Coalesce("total_tokens", 0) + F("retry_extra_tokens")), 0))["n"]
    return int(folded) + int(pending)

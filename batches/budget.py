"""Team token budgets, the batches side: the database count that re-seeds a lost ledger (registered as
TeamUsage.used_tokens in apps.py). The submission's check: batches/submission/budget.py.

Reading and resetting the shared ledger from sync code: providers/limits/budgets.py; a Team row as
TeamLimits: teams/limits.py. See docs/quota.md "Team budgets".
"""

from __future__ import annotations

from datetime import date

from django.db.models import F, Sum
from django.db.models.functions import Coalesce

from .models import Batch, BatchItem, TeamUsageDaily


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

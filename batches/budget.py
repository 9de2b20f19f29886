"""Team token budgets, the Django side: the submission check and re-seeding a lost ledger.

The ledger itself (reserve before each send, settle to the provider's reported usage after it) lives
in the quota store (gateway_engine/quota/ledger.py `reserve_budget` / `settle_budget`, Redis keys
``{prefix}budget:{<team>}:d:<YYYY-MM-DD>`` and ``…:m:<YYYY-MM>``), shared by every worker. See
docs/quota.md "Team budgets".
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from datetime import date

from django.conf import settings
from django.db.models import F, Sum
from django.db.models.functions import Coalesce

from gateway_engine.items import estimate_tokens
from gateway_engine.quota import BudgetExceeded, TeamLimits
from providers.quota import get_quota_store
from providers.quota.config import seed_budget_from_db  # closes its thread's connection

from .models import Batch, BatchItem, Team, TeamUsageDaily


def team_limits(team: Team) -> TeamLimits:
    return TeamLimits(
        name=team.name,
        daily_token_budget=team.daily_token_budget,
        monthly_token_budget=team.monthly_token_budget,
        max_provider_share=team.max_provider_share,
        weight=team.weight,
    )


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
    limits = team_limits(team)
    usage = _run(get_quota_store().budget_usage, limits, seed_budget_from_db)
    for period, limit, used in usage:
        if limit is not None and used + tokens > limit:
            return BudgetExceeded(team.name, period, int(limit), int(used), int(tokens))
    return None


def budget_usage(team: Team) -> list[tuple[str, int | None, int]]:
    """[(period, limit or None, used)] for today and this month, from the shared ledger."""
    return _run(get_quota_store().budget_usage, team_limits(team), seed_budget_from_db)


def forget_ledger_if_unbudgeted(team: Team) -> None:
    """On commit of a team save: a team without budgets is not counted, so its ledger is dropped (a
    budget set again later starts from the database, not from a stale count)."""
    if team.daily_token_budget is not None or team.monthly_token_budget is not None:
        return
    _run(get_quota_store().forget_budget, team_limits(team))


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


def _run(fn, *args):
    """Run a store coroutine from sync code (its own short event loop, in a thread if one is running)."""

    async def main():
        store = get_quota_store()
        try:
            return await fn(*args)
        finally:
            await store.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    out: list = []

    def target() -> None:
        try:
            out.append((True, asyncio.run(main())))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            out.append((False, exc))

    thread = threading.Thread(target=target, name="budget-usage")
    thread.start()
    thread.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value

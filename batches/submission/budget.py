"""A team's token budgets, the submission's rule: a batch whose estimated tokens exceed what is left of
the team's day or month budget (teams/limits.py) is refused before anything is stored. The ledger is read
through providers/limits/budgets.py; the engine reserves and settles per item (docs/quota.md "Team
budgets")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from gateway_engine.items import estimate_tokens
from gateway_engine.quota import BudgetExceeded
from providers.limits.budgets import budget_usage
from teams.limits import limits_of
from teams.models import Team


def estimate_payload_tokens(payloads: Iterable[dict[str, Any]]) -> int:
    """The engine's estimate (prompt chars / 4 + max_tokens or GATEWAY_DEFAULT_MAX_TOKENS; an embeddings
    item's input only), summed."""
    default = int(settings.GATEWAY_DEFAULT_MAX_TOKENS)
    return sum(
        estimate_tokens(
            p.get("messages") or [], p.get("params") or {}, default, embedding_input=p.get("input")
        )
        for p in payloads
    )


def budget_refusal(team: Team, tokens: int) -> BudgetExceeded | None:
    """None if the team's remaining day and month budgets can take `tokens` more; else why not
    (the first period without room: the day before the month). Reads the shared ledger (seeding it
    from the database if it is missing). Raises QuotaStoreUnavailable if Redis is down."""
    if not limits_of(team).has_budget:
        return None
    for period, limit, used in budget_usage(team):
        if limit is not None and used + tokens > limit:
            return BudgetExceeded(team.name, period, int(limit), int(used), int(tokens))
    return None

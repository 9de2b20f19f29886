"""A Team row as the engine's TeamLimits: the one place a team's live limits (budgets, share cap,
weight, interactive waiting limit) are turned into the value the quota store and the engine read."""

from __future__ import annotations

from gateway_engine.quota.types import TeamLimits

from .models import Team


def team_limits(team: Team) -> TeamLimits:
    return TeamLimits(
        name=team.name,
        daily_token_budget=team.daily_token_budget,
        monthly_token_budget=team.monthly_token_budget,
        max_provider_share=team.max_provider_share,
        weight=team.weight,
        max_waiting_calls=team.max_waiting_calls,
    )

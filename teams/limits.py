"""A team's limits, resolved: the one module every per-team limit is read through.

Each limit is the team's own value (a Team field, set in the admin) or else the deployment's default
setting; ``limits_of(team)`` answers them all as one ``TeamLimitSet``:

    limit                      Team field                    default (settings)                    enforced by
    pending items              max_pending_items             GATEWAY_TEAM_MAX_PENDING_ITEMS        batches/submission/queue_limits.py
    open batches               max_open_batches              GATEWAY_TEAM_MAX_OPEN_BATCHES         batches/submission/queue_limits.py
    submissions per minute     max_submissions_per_minute    GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE
    stored /v1 files, bytes    max_stored_files / _bytes     GATEWAY_FILES_MAX_PER_TEAM / _BYTES_  openai_api/files.py
    token budget (day, month)  daily/monthly_token_budget    none (unlimited)                      batches/submission/budget.py, the
                                                                                                   engine's ledger (quota/ledger.py)
    share of a provider's RPM  max_provider_share            none (no cap)                         the engine's admission (quota/)
    RPM / TPM, all providers   rpm_limit / tpm_limit         none; burst GATEWAY_TEAM_BURST_SECONDS the engine's admission (quota/)
    fair-share weight          weight                        1                                     batches/scheduling/fair.py
    waiting interactive calls  max_waiting_calls             1000                                  quota/fair_gate.py

``team_limits(team)`` is the engine's view of the live ones (``TeamLimits``: what the quota store and
admission read, reloaded by every worker on a save). Nothing here counts usage (teams/usage.py asks the
apps that hold the data).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from gateway_engine.quota.team_quota import TeamLimits

from .models import Team


@dataclass(frozen=True)
class TeamLimitSet:
    """Every limit of one team, defaults applied (None: unlimited / no cap)."""

    max_pending_items: int
    max_open_batches: int
    max_submissions_per_minute: int
    max_stored_files: int
    max_stored_file_bytes: int
    daily_token_budget: int | None
    monthly_token_budget: int | None
    max_provider_share: float | None
    rpm_limit: int | None
    tpm_limit: int | None
    burst_seconds: float
    weight: int
    max_waiting_calls: int

    @property
    def has_budget(self) -> bool:
        return self.daily_token_budget is not None or self.monthly_token_budget is not None

    def rate_limits(self) -> dict[str, int | float | None]:
        """The RPM / TPM limits across all providers, as /api/v1/usage and the usage page show them."""
        return {"rpm": self.rpm_limit, "tpm": self.tpm_limit, "burst_seconds": self.burst_seconds}


def _or_default(value: int | None, setting: str) -> int:
    return int(value) if value else int(getattr(settings, setting))


def limits_of(team: Team) -> TeamLimitSet:
    return TeamLimitSet(
        max_pending_items=_or_default(team.max_pending_items, "GATEWAY_TEAM_MAX_PENDING_ITEMS"),
        max_open_batches=_or_default(team.max_open_batches, "GATEWAY_TEAM_MAX_OPEN_BATCHES"),
        max_submissions_per_minute=_or_default(
            team.max_submissions_per_minute, "GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE"
        ),
        max_stored_files=_or_default(team.max_stored_files, "GATEWAY_FILES_MAX_PER_TEAM"),
        max_stored_file_bytes=_or_default(team.max_stored_file_bytes, "GATEWAY_FILES_MAX_BYTES_PER_TEAM"),
        daily_token_budget=team.daily_token_budget,
        monthly_token_budget=team.monthly_token_budget,
        max_provider_share=team.max_provider_share,
        rpm_limit=team.rpm_limit,
        tpm_limit=team.tpm_limit,
        burst_seconds=float(settings.GATEWAY_TEAM_BURST_SECONDS),
        weight=team.weight,
        max_waiting_calls=team.max_waiting_calls,
    )


def team_limits(team: Team) -> TeamLimits:
    """A Team row as the engine's TeamLimits (budgets, share cap, RPM / TPM, weight, waiting limit)."""
    resolved = limits_of(team)
    return TeamLimits(
        name=team.name,
        daily_token_budget=resolved.daily_token_budget,
        monthly_token_budget=resolved.monthly_token_budget,
        max_provider_share=resolved.max_provider_share,
        weight=resolved.weight,
        max_waiting_calls=resolved.max_waiting_calls,
        rpm_limit=resolved.rpm_limit,
        tpm_limit=resolved.tpm_limit,
        burst_seconds=resolved.burst_seconds,
    )

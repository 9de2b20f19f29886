"""What a team has used of its limits: tokens of a budget period, the budget ledger, queued work.

The counts live above this app (tokens in batches' tables, the ledger in the quota store behind
providers.limits, the queue in batches), so the app that owns them registers one ``TeamUsage`` at
start-up (``batches.apps.BatchesConfig.ready``) and the readers here — the Team admin, the re-seed
of a lost budget ledger (``seed_budget_from_db``, handed to the quota store by providers.limits) —
ask it. Nothing in this module imports an app above teams.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections

from gateway_engine.quota.team_quota import TeamQuotaState

from .limits import limits_of
from .models import Team


@dataclass(frozen=True)
class QueueUsage:
    """A team's queued work against its limits (batches/submission/queue_limits.py counts it)."""

    pending_items: int
    max_pending_items: int
    open_batches: int
    max_open_batches: int
    submissions_last_minute: int
    max_submissions_per_minute: int

    def as_dict(self) -> dict[str, int]:
        return {
            "pending_items": self.pending_items,
            "max_pending_items": self.max_pending_items,
            "open_batches": self.open_batches,
            "max_open_batches": self.max_open_batches,
            "submissions_last_minute": self.submissions_last_minute,
            "max_submissions_per_minute": self.max_submissions_per_minute,
        }


@dataclass(frozen=True)
class TeamUsage:
    """The three counters, each a plain function of the app that owns the data."""

    # (team name, period, "d:YYYY-MM-DD" | "m:YYYY-MM") -> tokens used in that UTC period (database)
    used_tokens: Callable[[str, str, str], int]
    # team -> [(period, limit or None, used)] for today and this month, from the shared ledger
    budget_usage: Callable[[Team], list[tuple[str, int | None, int]]]
    # team -> its queued work against its limits
    queue_usage: Callable[[Team], QueueUsage]
    # team -> its RPM / TPM buckets across providers and its use in the last 60 s (the quota store)
    rate_usage: Callable[[Team], TeamQuotaState]


def rate_limits(team: Team) -> dict[str, object]:
    """The team's RPM / TPM limits and current use, as /api/v1/usage (``rate_limits``) and the usage page
    show them (docs/api.md): per dimension the limit (None: unlimited), what was granted in the last
    60 s and what the bucket holds now (both None while there is no limit: not counted)."""
    resolved = limits_of(team)
    state = team_usage().rate_usage(team) if resolved.rpm_limit or resolved.tpm_limit else None

    def dimension(limit: int | None, used: int, available: float) -> dict[str, int | None]:
        if limit is None:
            return {"limit": None, "used_last_minute": None, "available_now": None}
        return {"limit": limit, "used_last_minute": used, "available_now": int(available)}

    if state is None:
        state = TeamQuotaState(team.name, None, None)
    return {
        "rpm": dimension(resolved.rpm_limit, state.requests_last_minute, state.rpm_available),
        "tpm": dimension(resolved.tpm_limit, state.tokens_last_minute, state.tpm_available),
        "burst_seconds": resolved.burst_seconds,
    }


_registered: TeamUsage | None = None


def register_team_usage(usage: TeamUsage) -> None:
    """Called once per process by the app that counts usage (BatchesConfig.ready)."""
    global _registered
    _registered = usage


def team_usage() -> TeamUsage:
    if _registered is None:
        raise RuntimeError("no TeamUsage registered: is the 'batches' app in INSTALLED_APPS?")
    return _registered


def seed_budget_from_db(team: str, period: str, suffix: str) -> int:
    """Sync: tokens a team already used in a UTC period (re-seeds a missing ledger). Worker thread."""
    try:
        return team_usage().used_tokens(team, period, suffix)
    finally:
        connections.close_all()  # this thread's connections only; re-seeds are rare

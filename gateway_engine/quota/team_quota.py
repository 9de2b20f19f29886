"""A team's side of a grant, apart from the provider's ``ProviderLimits``:

* ``TeamLimits`` — a team's live limits (the gateway loads them from its Team rows: teams/limits.py);
* ``TeamQuota`` — what one grant takes of the team's own buckets beside the provider's, atomically with
  them (the ACQUIRE script in lua.py, and its twin in local_buckets.py):

      share bucket  per (provider, team): 1 request, rate = the provider's RPM × share (its burst, its
                    margin) — ``max_provider_share``
      team bucket   per team, across all providers: 1 request of ``rpm``, the estimated tokens of ``tpm``
                    — ``rpm_limit`` / ``tpm_limit``; settled to the actual tokens like the provider's TPM

A team bucket of limit L per minute holds L × burst / 60 and refills at L × (60 − burst) / 60 per
minute, so no 60-second window admits more than L (a bucket admits at most capacity + rate × window).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .types import ProviderLimits

DEFAULT_TEAM_BURST_SECONDS = 10.0
MINUTE_MS = 60_000.0


@dataclass(frozen=True)
class TeamLimits:
    """A team's live limits (the gateway loads them from its Team rows, like the providers' limits)."""

    name: str
    daily_token_budget: int | None = None
    monthly_token_budget: int | None = None
    max_provider_share: float | None = None
    weight: int = 1
    max_waiting_calls: int | None = None  # interactive calls waiting at once per web process (fair_gate.py)
    rpm_limit: int | None = None  # requests per minute across all providers (None: unlimited)
    tpm_limit: int | None = None  # tokens per minute across all providers (None: unlimited)
    burst_seconds: float = DEFAULT_TEAM_BURST_SECONDS  # of the RPM / TPM limits (the module docstring)

    @property
    def has_budget(self) -> bool:
        return self.daily_token_budget is not None or self.monthly_token_budget is not None

    def quota(self) -> TeamQuota:
        """What a grant for this team takes of its own buckets."""
        return TeamQuota(
            self.name, self.max_provider_share, self.rpm_limit, self.tpm_limit, self.burst_seconds
        )

    def budgets(self, now_epoch_s: float) -> list[tuple[str, str, int | None, int]]:
        """[(period, ledger key suffix, limit or None, key ttl seconds)] for the UTC day and month of
        now: the ledger keeps both periods for every team (a budget set later starts right)."""
        now = datetime.fromtimestamp(now_epoch_s, UTC)
        day_end = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
        month_end = datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
        slack = 3600  # keys outlive their period a little (late settles land in a key that still exists)
        day_ttl = int((day_end - now).total_seconds()) + slack
        month_ttl = int((month_end - now).total_seconds()) + slack
        return [
            ("day", f"d:{now:%Y-%m-%d}", self.daily_token_budget, day_ttl),
            ("month", f"m:{now:%Y-%m}", self.monthly_token_budget, month_ttl),
        ]


@dataclass(frozen=True)
class TeamQuota:
    """One team's buckets beside a provider's (module docstring). ``share`` None or >= 1: no share cap;
    ``rpm`` / ``tpm`` None: that team bucket is not limited."""

    team: str
    share: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    burst_seconds: float = DEFAULT_TEAM_BURST_SECONDS

    def __post_init__(self) -> None:
        if self.share is not None and not self.share > 0:
            raise ValueError(f"TeamQuota({self.team!r}).share must be > 0")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"TeamQuota({self.team!r}).{name} must be >= 1 (None: unlimited)")
        if not 0 < self.burst_seconds < 60:
            raise ValueError(f"TeamQuota({self.team!r}).burst_seconds must be in (0, 60)")

    @property
    def share_capped(self) -> bool:
        return bool(self.team) and self.share is not None and self.share < 1.0

    def share_rate(self, limits: ProviderLimits) -> tuple[float, float]:
        """The share bucket's (rate per ms, capacity) on this provider."""
        per_minute = limits.rpm * float(self.share or 1.0)
        return per_minute / MINUTE_MS, limits.capacity_for(per_minute)

    @property
    def rate_limited(self) -> bool:
        """Whether the team has a bucket across all providers (an RPM or a TPM limit)."""
        return bool(self.team) and (self.rpm is not None or self.tpm is not None)

    def _rate(self, limit: int | None) -> tuple[float, float]:
        if limit is None:
            return 0.0, 0.0
        return limit * (60.0 - self.burst_seconds) / 60.0 / MINUTE_MS, max(
            1.0, limit * self.burst_seconds / 60.0
        )

    @property
    def rpm_rate(self) -> tuple[float, float]:
        """The team RPM bucket's (rate per ms, capacity); (0, 0): not limited."""
        return self._rate(self.rpm)

    @property
    def tpm_rate(self) -> tuple[float, float]:
        """The team TPM bucket's (rate per ms, capacity); (0, 0): not limited."""
        return self._rate(self.tpm)


@dataclass(frozen=True)
class TeamQuotaState:
    """A team's RPM / TPM buckets across providers now (the usage page, /api/v1/usage): the limits, what
    the buckets hold, and what was granted in the last 60 s (settled to the actual tokens)."""

    team: str
    rpm_limit: int | None
    tpm_limit: int | None
    rpm_available: float = 0.0
    rpm_capacity: float = 0.0
    tpm_available: float = 0.0
    tpm_capacity: float = 0.0
    requests_last_minute: int = 0
    tokens_last_minute: int = 0

    @classmethod
    def measured(
        cls, quota: TeamQuota, levels: tuple[float, float], observed: tuple[int, int]
    ) -> TeamQuotaState:
        return cls(
            quota.team,
            quota.rpm,
            quota.tpm,
            levels[0],
            quota.rpm_rate[1],
            levels[1],
            quota.tpm_rate[1],
            observed[0],
            observed[1],
        )

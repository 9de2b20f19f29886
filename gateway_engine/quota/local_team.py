"""The team's buckets in one process (team_quota.py): the share bucket per (provider, team) and the RPM /
TPM bucket per team across providers, with the team's observed rates. The same arithmetic as the Lua
functions of lua_team.py; the caller (local_buckets.py) holds the LocalState lock around every call."""

from __future__ import annotations

from dataclasses import dataclass, field

from .local_state import EPS, ProviderCell
from .team_quota import TeamQuota, TeamQuotaState
from .types import ProviderLimits


@dataclass
class TeamCell:
    """A team's RPM / TPM tokens (None: full, or the limit not set when last written), at ``ts`` ms."""

    rpm: float | None = None
    tpm: float | None = None
    ts: float = 0.0
    observed: ProviderCell = field(default_factory=ProviderCell)  # only its observed-rates slots


@dataclass(frozen=True)
class TeamLevels:
    """What a team's buckets hold at one moment (None: that bucket is not involved)."""

    share: float | None
    rpm: float | None
    tpm: float | None


def _level(value: float | None, elapsed: float, rate: tuple[float, float]) -> float:
    per_ms, capacity = rate
    if value is None or not per_ms:
        return capacity
    return min(capacity, value + elapsed * per_ms)


def _short(wait: float, have: float, need: float, per_ms: float) -> float:
    return max(wait, (need - have) / per_ms) if per_ms > 0 and have < need - EPS else wait


class TeamCells:
    """Every team's share and RPM / TPM buckets of this process."""

    def __init__(self) -> None:
        self._shares: dict[tuple[str, str], tuple[float, float]] = {}  # (provider, team) -> (r, ts)
        self._teams: dict[str, TeamCell] = {}

    def levels(
        self, limits: ProviderLimits, team: TeamQuota | None, now: float, share: bool = True
    ) -> TeamLevels:
        """The team's buckets refilled to ``now`` (the share bucket only when ``share`` and capped)."""
        level = None
        if share and team is not None and team.share_capped:
            per_ms, cap = team.share_rate(limits)
            held = self._shares.get((limits.name, team.team))
            level = cap if held is None else min(cap, held[0] + max(0.0, now - held[1]) * per_ms)
        if team is None or not team.rate_limited:
            return TeamLevels(level, None, None)
        cell = self._teams.setdefault(team.team, TeamCell())
        elapsed = max(0.0, now - cell.ts)
        return TeamLevels(
            level, _level(cell.rpm, elapsed, team.rpm_rate), _level(cell.tpm, elapsed, team.tpm_rate)
        )

    @staticmethod
    def wait_ms(limits: ProviderLimits, team: TeamQuota, levels: TeamLevels, tokens: int) -> float:
        """ms until 1 request and ``tokens`` fit the team's buckets (0: they do; -1: ``tokens`` never
        fit its TPM bucket)."""
        wait = 0.0
        if levels.share is not None:
            wait = _short(wait, levels.share, 1, team.share_rate(limits)[0])
        if levels.rpm is not None and levels.tpm is not None:
            (qr, _), (kr, kc) = team.rpm_rate, team.tpm_rate
            if kr and tokens > kc:
                return -1.0
            wait = _short(_short(wait, levels.rpm, 1, qr), levels.tpm, tokens, kr)
        return wait

    def move(
        self,
        limits: ProviderLimits,
        team: TeamQuota,
        levels: TeamLevels,
        taken: tuple[int, int],
        now: float,
    ) -> None:
        """Take ``taken`` (requests, tokens; negative: give back) from the levels ``levels`` read, each
        clamped to its capacity; the team's observed rates move with them."""
        requests, tokens = taken
        if levels.share is not None:
            cap = team.share_rate(limits)[1]
            self._shares[(limits.name, team.team)] = (min(cap, levels.share - requests), now)
        if levels.rpm is None or levels.tpm is None:
            return
        cell = self._teams.setdefault(team.team, TeamCell())
        (qr, qc), (kr, kc) = team.rpm_rate, team.tpm_rate
        cell.rpm = min(qc, levels.rpm - requests) if qr else None
        cell.tpm = min(kc, levels.tpm - tokens) if kr else None
        cell.ts = now
        cell.observed.observe(now, requests, tokens)

    def snapshot(self, team: TeamQuota, now: float) -> TeamQuotaState:
        if not team.rate_limited:
            return TeamQuotaState(team.team, team.rpm, team.tpm)
        cell = self._teams.setdefault(team.team, TeamCell())
        elapsed = max(0.0, now - cell.ts)
        levels = (_level(cell.rpm, elapsed, team.rpm_rate), _level(cell.tpm, elapsed, team.tpm_rate))
        return TeamQuotaState.measured(team, levels, cell.observed.observed(now))

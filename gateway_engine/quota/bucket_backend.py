"""The atomic primitives a token-bucket backend implements (the Redis Lua scripts, redis_buckets.py; the
in-process store, local_buckets.py): each one call, all-or-nothing, never waiting. Everything that
waits for a grant, and what a settle moves, is buckets.py over these."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from .team_quota import TeamQuota, TeamQuotaState
from .types import Decision, Lane, PauseState, ProviderLimits, ProviderQuotaState, SettleOutcome


class BucketBackend(ABC):
    """A provider's RPM, TPM (ITPM / OTPM) buckets, the team's buckets, the pause, the interactive marks."""

    @abstractmethod
    async def try_acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        lane: Lane = "batch",
        team: TeamQuota | None = None,
        lease_id: str | None = None,
    ) -> Decision:
        """One atomic attempt: take 1 RPM token, `tokens` TPM tokens, `input_tokens` / `output_tokens`
        of the ITPM / OTPM buckets where the limits set them (and of the team's buckets: 1 share token
        when it has a share cap, 1 request and `tokens` of its RPM / TPM limits), or nothing. Never
        waits. ProviderPaused (nothing taken) while paused. A ``batch`` ask is told to wait YIELD_MS
        while an interactive caller's mark on the provider is live (priority.py). ``lease_id`` (the
        ADMIT): when the buckets grant, also take the provider's concurrency lease under that id in the
        same step; if every lease is held nothing is taken (``Decision.lease_wait_ms``)."""

    @abstractmethod
    async def mark_interactive(self, provider: str, member: str, ttl_ms: int) -> None:
        """Set (or renew) ``member``'s interactive mark on the provider for ``ttl_ms``."""

    @abstractmethod
    async def unmark_interactive(self, provider: str, member: str) -> None:
        """Remove ``member``'s interactive mark now."""

    @abstractmethod
    async def interactive_waiters(self, provider: str) -> int:
        """How many live interactive marks the provider has (processes with a waiting caller)."""

    @abstractmethod
    async def reconcile_delta(
        self,
        limits: ProviderLimits,
        deltas: tuple[int, int, int],
        team: TeamQuota | None = None,
        team_delta: int = 0,
        also: SettleOutcome | None = None,
    ) -> Any:
        """Take the deltas more from the TPM, ITPM and OTPM buckets (negative: refund, clamped to
        capacity), and ``team_delta`` from the team's TPM bucket, atomically. ``also`` (only where the
        backend folds it: the Redis store, SETTLE): a caller's step run in the same atomic script; its
        answer is returned (else None)."""

    @abstractmethod
    async def give_back(
        self, limits: ProviderLimits, amounts: tuple[int, int, int], team: TeamQuota | None = None
    ) -> None:
        """Atomically give back 1 RPM token, the TPM / ITPM / OTPM ``amounts`` (and the team's share
        token, RPM and TPM tokens), each clamped to its capacity."""

    @abstractmethod
    async def team_snapshot(self, team: TeamQuota) -> TeamQuotaState:
        """The team's RPM / TPM buckets and what it was granted in the last 60 s, now."""

    @abstractmethod
    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        """Pause every worker for this provider for retry_after_seconds (never shortens a pause).
        Returns paused_until in the store's ms clock."""

    @abstractmethod
    async def clear_pause(self, limits: ProviderLimits) -> None:
        """End a 429 pause (penalize) now, for every worker; tokens and leases are untouched.
        For operators (admin action "Clear rate-limit pause")."""

    @abstractmethod
    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        """The provider's bucket levels, pause, observed rates and leases in flight, now."""

    @abstractmethod
    async def set_pause(self, pause: PauseState) -> bool:
        """Hold ``pause`` for every worker unless the pause already held lasts longer; True if set.
        (The backend stamps ``since`` with its own clock.)"""

    @abstractmethod
    async def drop_pause(self, provider: str) -> bool:
        """Lift the provider's pause; True if one held."""

    @abstractmethod
    async def provider_pause(self, provider: str) -> PauseState | None:
        """The provider's pause, or None (an expired one is gone)."""

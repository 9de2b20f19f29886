"""The in-process token buckets: the same semantics as the Redis Lua scripts (ACQUIRE / ADMIT, RECONCILE,
RELEASE, PENALIZE, UNPAUSE, SNAPSHOT in lua.py), on the shared LocalState."""

from __future__ import annotations

import math
import time

from .adaptive import RemainingQuota
from .buckets import TokenBuckets, log_pause
from .local_leases import take_lease
from .local_state import LocalState, put, refill, wait_ms_for
from .local_team import TeamCells
from .lua import YIELD_MS
from .team_quota import TeamQuota, TeamQuotaState
from .types import Decision, Lane, PauseState, ProviderLimits, ProviderQuotaState, SettleOutcome


class LocalTokenBuckets(TokenBuckets):
    """Buckets and the team share buckets of one process."""

    def __init__(self, state: LocalState) -> None:
        super().__init__()
        self._state = state
        self._teams = TeamCells()  # the teams' share and RPM / TPM buckets (local_team.py)
        # provider -> {member: mark expiry (store ms)}: interactive callers waiting (lua.py INTERACTIVE_MARK)
        self._interactive: dict[str, dict[str, float]] = {}

    def try_acquire_sync(
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
        need = (
            int(tokens),
            int(input_tokens) if limits.itpm else 0,
            int(output_tokens) if limits.otpm else 0,
        )
        with self._state.lock:
            now = self._state.now_ms()
            pause = self._state.pause(limits.name, now)
            if pause is not None:
                raise pause.refusal()
            if (
                need[0] > limits.tpm_capacity
                or need[1] > limits.itpm_capacity
                or need[2] > limits.otpm_capacity
            ):
                return Decision(False, 0, now, impossible=True)
            if lane == "batch" and self._interactive_live(limits.name, now):
                return Decision(False, YIELD_MS, now)  # interactive callers wait here: they go first
            b = self._state.cell(limits.name)
            rpm, tpm, itpm, otpm = refill(b, limits, now)
            slow = b.slowdowns(limits)
            wait = wait_ms_for(limits, (rpm, tpm, itpm, otpm), b.paused_until, now, need, slow)
            levels = self._teams.levels(limits, team, now)
            team_wait = 0.0 if team is None else self._teams.wait_ms(limits, team, levels, need[0])
            if team_wait < 0:
                return Decision(False, 0, now, impossible=True)  # above the team's TPM bucket
            if team_wait > 0:
                if wait <= 0:  # only the team's buckets are short (lua.py ACQUIRE)
                    return Decision(False, max(1, math.ceil(team_wait)), now, team_wait=True)
                wait = max(wait, team_wait)
            if wait > 0:
                return Decision(False, max(1, math.ceil(wait)), now)
            if lease_id is not None:  # ADMIT: the lease in the same step, or nothing (lua.py)
                busy = take_lease(b.leases, limits, lease_id, now)
                if busy:
                    return Decision(False, 0, now, lease_wait_ms=busy)
            put(b, limits, (rpm - 1, tpm - need[0], itpm - need[1], otpm - need[2]), now)
            if team is not None:
                self._teams.move(limits, team, levels, (1, need[0]), now)
            b.observe(now, 1, need[0])
            mark = b.adaptive.grant(need[0]) if limits.adaptive else None
            return Decision(True, 0, now, sent_mark=mark)

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
        return self.try_acquire_sync(
            limits, tokens, input_tokens, output_tokens, lane=lane, team=team, lease_id=lease_id
        )

    def _interactive_live(self, provider: str, now: float) -> bool:
        """Whether an interactive caller's mark on the provider is live (expired ones dropped). Caller
        holds the lock."""
        marks = self._interactive.get(provider)
        if not marks:
            return False
        for member in [m for m, until in marks.items() if until <= now]:
            del marks[member]
        return bool(marks)

    async def mark_interactive(self, provider: str, member: str, ttl_ms: int) -> None:
        with self._state.lock:
            self._interactive.setdefault(provider, {})[member] = self._state.now_ms() + ttl_ms

    async def unmark_interactive(self, provider: str, member: str) -> None:
        with self._state.lock:
            self._interactive.get(provider, {}).pop(member, None)

    async def interactive_waiters(self, provider: str) -> int:
        with self._state.lock:
            live = self._interactive_live(provider, self._state.now_ms())
            return len(self._interactive.get(provider, {})) if live else 0

    async def reconcile_delta(
        self,
        limits: ProviderLimits,
        deltas: tuple[int, int, int],
        team: TeamQuota | None = None,
        team_delta: int = 0,
        also: SettleOutcome | None = None,  # never given: this store folds nothing (store.folds)
    ) -> None:
        delta_tokens, delta_input, delta_output = deltas
        with self._state.lock:
            now = self._state.now_ms()
            b = self._state.cell(limits.name)
            rpm, tpm, itpm, otpm = refill(b, limits, now)
            put(b, limits, (
                rpm,
                min(limits.tpm_capacity, tpm - delta_tokens),
                min(limits.itpm_capacity, itpm - delta_input),
                min(limits.otpm_capacity, otpm - delta_output),
            ), now)  # fmt: skip
            b.observe(now, 0, delta_tokens)
            if team is not None and team.rate_limited:
                levels = self._teams.levels(limits, team, now, share=False)
                self._teams.move(limits, team, levels, (0, team_delta), now)

    async def give_back(
        self, limits: ProviderLimits, amounts: tuple[int, int, int], team: TeamQuota | None = None
    ) -> None:
        tokens, input_tokens, output_tokens = (int(a) for a in amounts)
        with self._state.lock:
            now = self._state.now_ms()
            b = self._state.cell(limits.name)
            rpm, tpm, itpm, otpm = refill(b, limits, now)
            put(b, limits, (
                min(limits.rpm_capacity, rpm + 1),
                min(limits.tpm_capacity, tpm + tokens),
                min(limits.itpm_capacity, itpm + input_tokens),
                min(limits.otpm_capacity, otpm + output_tokens),
            ), now)  # fmt: skip
            if team is not None:
                self._teams.move(limits, team, self._teams.levels(limits, team, now), (-1, -tokens), now)
            b.observe(now, -1, -tokens)

    async def team_snapshot(self, team: TeamQuota) -> TeamQuotaState:
        with self._state.lock:
            return self._teams.snapshot(team, self._state.now_ms())

    async def follow(
        self, limits: ProviderLimits, sent_mark: tuple[int, int] | None, quota: RemainingQuota
    ) -> None:
        with self._state.lock:
            now = self._state.now_ms()
            b = self._state.cell(limits.name)
            rpm, tpm, itpm, otpm = refill(b, limits, now)
            rpm, tpm = b.adaptive.follow(now, (rpm, tpm), limits, sent_mark, quota)
            put(b, limits, (rpm, tpm, itpm, otpm), now)

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        log_pause(limits.name, retry_after_seconds)
        with self._state.lock:
            now = self._state.now_ms()
            b = self._state.cell(limits.name)
            b.paused_until = max(b.paused_until, now + max(0.0, float(retry_after_seconds)) * 1000.0)
            return int(b.paused_until)

    async def clear_pause(self, limits: ProviderLimits) -> None:
        with self._state.lock:
            self._state.cell(limits.name).paused_until = 0.0

    async def set_pause(self, pause: PauseState) -> bool:
        with self._state.lock:
            return self._state.set_pause(pause, self._state.now_ms())

    async def drop_pause(self, provider: str) -> bool:
        with self._state.lock:
            return self._state.lift_pause(provider, self._state.now_ms())

    async def provider_pause(self, provider: str) -> PauseState | None:
        with self._state.lock:
            return self._state.pause(provider, self._state.now_ms())

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        with self._state.lock:
            now = self._state.now_ms()
            b = self._state.cell(limits.name)
            rpm, tpm, itpm, otpm = refill(b, limits, now)
            slow = b.slowdowns(limits)
            wait = wait_ms_for(limits, (rpm, tpm, itpm, otpm), b.paused_until, now, (1, 1, 1), slow)
            in_flight = sum(1 for exp in b.leases.values() if exp > now)
            return ProviderQuotaState.measured(
                limits,
                (rpm, tpm, itpm, otpm),
                wait_ms=math.ceil(wait),
                # as wall-clock epoch ms, like the Redis store (whose clock is the server's TIME)
                paused_until_ms=int(time.time() * 1000 + b.paused_until - now) if b.paused_until > now else 0,
                leases_in_flight=in_flight,
                observed=b.observed(now),
                pause=self._state.pause(limits.name, now),
                adaptive=b.adaptive.view(now, limits),
            )

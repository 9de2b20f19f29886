"""In-process quota store (REDIS_URL unset): the same token-bucket semantics as the Redis Lua scripts,
on time.monotonic (or an injected clock), guarded by a threading.Lock so several event loops/threads
of one process share it safely."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from ..protocols import Clock
from .base import BaseQuotaStore, log_pause
from .types import Decision, ProviderLimits, ProviderQuotaState

OBS_SLOTS = 60
EPS = 1e-9


@dataclass
class _Bucket:
    rpm: float | None = None  # None = never used: full
    tpm: float = 0.0
    ts: float = 0.0  # ms
    paused_until: float = 0.0  # ms
    leases: dict[str, float] = field(default_factory=dict)  # lease id -> expiry ms
    obs_sec: list[int] = field(default_factory=lambda: [-1] * OBS_SLOTS)
    obs_req: list[int] = field(default_factory=lambda: [0] * OBS_SLOTS)
    obs_tok: list[int] = field(default_factory=lambda: [0] * OBS_SLOTS)


def refill(b: _Bucket, limits: ProviderLimits, now: float) -> tuple[float, float]:
    """Current (rpm, tpm) tokens: continuously refilled, clamped to the (possibly lowered) capacity."""
    rc, tc = limits.rpm_capacity, limits.tpm_capacity
    if b.rpm is None:
        return rc, tc
    elapsed = max(0.0, now - b.ts)
    return min(rc, b.rpm + elapsed * limits.rpm_per_ms), min(tc, b.tpm + elapsed * limits.tpm_per_ms)


def wait_ms_for(
    limits: ProviderLimits, rpm: float, tpm: float, paused_until: float, now: float, n: int
) -> float:
    wait = max(0.0, paused_until - now)
    if rpm < 1 - EPS:
        wait = max(wait, (1 - rpm) / limits.rpm_per_ms)
    if tpm < n - EPS:
        wait = max(wait, (n - tpm) / limits.tpm_per_ms)
    return wait


# Single-process mode's config version: a change to providers, routes or teams bumps it (the Django side,
# providers.live_config, calls bump_local_config_version) and LimitsSources compare it with what they hold.
_config_version = 0
_config_version_lock = threading.Lock()


def bump_local_config_version() -> int:
    global _config_version
    with _config_version_lock:
        _config_version += 1
        return _config_version


def local_config_version() -> int:
    return _config_version


class LocalQuotaStore(BaseQuotaStore):
    backend = "local"

    def __init__(
        self,
        clock: Clock = time.monotonic,
        global_max_in_flight: int | None = None,
        cluster_max_in_flight: int | None = 0,  # one process: the per-process cap is the cluster cap
    ):
        super().__init__(global_max_in_flight, cluster_max_in_flight)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self._team_buckets: dict[tuple[str, str], tuple[float, float]] = {}  # (provider, team) -> (r, ts)
        self._ledger: dict[str, int] = {}

    def now_ms(self) -> float:
        return self._clock() * 1000.0

    def _bucket(self, name: str) -> _Bucket:
        b = self._buckets.get(name)
        if b is None:
            b = self._buckets[name] = _Bucket()
        return b

    @staticmethod
    def _observe(b: _Bucket, now: float, requests: int, tokens: int) -> None:
        sec = int(now // 1000)
        slot = sec % OBS_SLOTS
        if b.obs_sec[slot] != sec:
            b.obs_sec[slot], b.obs_req[slot], b.obs_tok[slot] = sec, requests, tokens
        else:
            b.obs_req[slot] += requests
            b.obs_tok[slot] += tokens

    # ---- primitives --------------------------------------------------------------------------------------
    def try_acquire_sync(self, limits: ProviderLimits, tokens: int = 0) -> Decision:
        n = int(tokens)
        with self._lock:
            now = self.now_ms()
            if n > limits.tpm_capacity:
                return Decision(False, 0, now, impossible=True)
            b = self._bucket(limits.name)
            rpm, tpm = refill(b, limits, now)
            wait = wait_ms_for(limits, rpm, tpm, b.paused_until, now, n)
            team = self._team_level(limits, now)
            if team is not None and team < 1 - EPS:
                wait = max(wait, (1 - team) / limits.team_rpm_per_ms)
            if wait > 0:
                return Decision(False, max(1, math.ceil(wait)), now)
            b.rpm, b.tpm, b.ts = rpm - 1, tpm - n, now
            if team is not None:
                self._team_buckets[(limits.name, limits.team)] = (team - 1, now)
            self._observe(b, now, 1, n)
            return Decision(True, 0, now)

    async def try_acquire(self, limits: ProviderLimits, tokens: int = 0) -> Decision:
        return self.try_acquire_sync(limits, tokens)

    def _team_level(self, limits: ProviderLimits, now: float) -> float | None:
        """The team share bucket's tokens now (None: no share cap). Caller holds the lock."""
        if not limits.team_capped:
            return None
        cap = limits.team_rpm_capacity
        held = self._team_buckets.get((limits.name, limits.team))
        if held is None:
            return cap
        level, ts = held
        return min(cap, level + max(0.0, now - ts) * limits.team_rpm_per_ms)

    async def _reconcile_delta(self, limits: ProviderLimits, delta_tokens: int) -> None:
        with self._lock:
            now = self.now_ms()
            b = self._bucket(limits.name)
            rpm, tpm = refill(b, limits, now)
            b.rpm, b.tpm, b.ts = rpm, min(limits.tpm_capacity, tpm - delta_tokens), now
            self._observe(b, now, 0, delta_tokens)

    async def _release(self, limits: ProviderLimits, tokens: int) -> None:
        n = int(tokens)
        with self._lock:
            now = self.now_ms()
            b = self._bucket(limits.name)
            rpm, tpm = refill(b, limits, now)
            b.rpm = min(limits.rpm_capacity, rpm + 1)
            b.tpm = min(limits.tpm_capacity, tpm + n)
            b.ts = now
            team = self._team_level(limits, now)
            if team is not None:
                self._team_buckets[(limits.name, limits.team)] = (
                    min(limits.team_rpm_capacity, team + 1),
                    now,
                )
            self._observe(b, now, -1, -n)

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        log_pause(limits.name, retry_after_seconds)
        with self._lock:
            now = self.now_ms()
            b = self._bucket(limits.name)
            b.paused_until = max(b.paused_until, now + max(0.0, float(retry_after_seconds)) * 1000.0)
            return int(b.paused_until)

    async def clear_pause(self, limits: ProviderLimits) -> None:
        with self._lock:
            self._bucket(limits.name).paused_until = 0.0

    async def _lease_try(self, limits: ProviderLimits, lease_id: str) -> int:
        with self._lock:
            now = self.now_ms()
            leases = self._bucket(limits.name).leases
            for lid in [lid for lid, exp in leases.items() if exp <= now]:
                del leases[lid]
            if len(leases) < limits.max_concurrency:
                leases[lease_id] = now + limits.lease_ttl_seconds * 1000.0
                return 0
            return max(1, math.ceil(min(leases.values()) - now))

    async def _lease_peek(self, limits: ProviderLimits) -> int:
        with self._lock:
            now = self.now_ms()
            live = [exp for exp in self._bucket(limits.name).leases.values() if exp > now]
            if len(live) < limits.max_concurrency:
                return 0
            return max(1, math.ceil(min(live) - now))

    async def _lease_refresh(self, limits: ProviderLimits, lease_id: str) -> bool:
        with self._lock:
            now = self.now_ms()
            leases = self._bucket(limits.name).leases
            if leases.get(lease_id, -1.0) <= now:
                leases.pop(lease_id, None)
                return False
            leases[lease_id] = now + limits.lease_ttl_seconds * 1000.0
            return True

    async def _lease_release(self, limits: ProviderLimits, lease_id: str) -> None:
        with self._lock:
            self._bucket(limits.name).leases.pop(lease_id, None)

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        with self._lock:
            now = self.now_ms()
            b = self._bucket(limits.name)
            rpm, tpm = refill(b, limits, now)
            wait = wait_ms_for(limits, rpm, tpm, b.paused_until, now, 1)
            sec = int(now // 1000)
            observed_rpm = observed_tpm = 0
            for i in range(OBS_SLOTS):
                if sec - OBS_SLOTS < b.obs_sec[i] <= sec:
                    observed_rpm += b.obs_req[i]
                    observed_tpm += b.obs_tok[i]
            in_flight = sum(1 for exp in b.leases.values() if exp > now)
            return ProviderQuotaState(
                provider=limits.name,
                rpm_tokens_available=rpm,
                rpm_capacity=limits.rpm_capacity,
                tpm_tokens_available=tpm,
                tpm_capacity=limits.tpm_capacity,
                wait_ms=math.ceil(wait),
                # as wall-clock epoch ms, like the Redis store (whose clock is the server's TIME)
                paused_until_ms=int(time.time() * 1000 + b.paused_until - now) if b.paused_until > now else 0,
                leases_in_flight=in_flight,
                max_concurrency=limits.max_concurrency,
                configured_rpm=limits.rpm,
                configured_tpm=limits.tpm,
                observed_rpm=observed_rpm,
                observed_tpm=observed_tpm,
            )

    async def config_version(self) -> int:
        return local_config_version()

    # ---- budget ledger -------------------------------------------------------------------------------
    def _budget_key(self, team: str, suffix: str) -> str:
        return f"{team}:{suffix}"

    async def _budget_try(self, keys: list[str], tokens: int, limits: list[int]) -> tuple[int, int, int]:
        with self._lock:
            for i, key in enumerate(keys):
                if key not in self._ledger:
                    return 2, i, 0
            for i, (key, limit) in enumerate(zip(keys, limits, strict=True)):
                if limit >= 0 and self._ledger[key] + tokens > limit:
                    return 1, i, self._ledger[key]
            for key in keys:
                self._ledger[key] += tokens
            return 0, 0, 0

    async def _budget_adjust(self, keys: list[str], delta: int) -> None:
        with self._lock:
            for key in keys:
                if key in self._ledger:
                    self._ledger[key] = max(0, self._ledger[key] + delta)

    async def _budget_get(self, keys: list[str]) -> list[int | None]:
        with self._lock:
            return [self._ledger.get(key) for key in keys]

    async def _budget_seed(self, key: str, used: int, ttl_seconds: int) -> None:
        with self._lock:
            self._ledger.setdefault(key, int(used))

    async def _budget_delete(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._ledger.pop(key, None)

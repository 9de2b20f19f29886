"""The in-process store's state (REDIS_URL unset): each provider's bucket levels, pause, observed rates and
lease table, on time.monotonic (or an injected clock), guarded by one threading.Lock so several event
loops and threads of one process share it safely. The same arithmetic as the Redis Lua scripts (lua.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..protocols import Clock
from .adaptive import AdaptiveCell, Slowdown, slowed_level, slowed_wait
from .types import PauseState, ProviderLimits

OBS_SLOTS = 60
EPS = 1e-9


@dataclass
class ProviderCell:
    """One provider's state in the in-process store (the Redis keys :b, :o and :l of lua.py)."""

    rpm: float | None = None  # None = never used: full
    tpm: float = 0.0
    itpm: float | None = None  # None = full (never used, or itpm not set when last written)
    otpm: float | None = None
    ts: float = 0.0  # ms
    paused_until: float = 0.0  # ms
    leases: dict[str, float] = field(default_factory=dict)  # lease id -> expiry ms
    obs_sec: list[int] = field(default_factory=lambda: [-1] * OBS_SLOTS)
    obs_req: list[int] = field(default_factory=lambda: [0] * OBS_SLOTS)
    obs_tok: list[int] = field(default_factory=lambda: [0] * OBS_SLOTS)
    adaptive: AdaptiveCell = field(default_factory=AdaptiveCell)  # shared keys (adaptive.py)

    def slowdowns(self, limits: ProviderLimits) -> tuple[Slowdown | None, Slowdown | None]:
        """The adjusted refill of RPM and TPM (adaptive providers only; None: configured)."""
        if not limits.adaptive:
            return None, None
        return self.adaptive.requests.slow, self.adaptive.tokens.slow

    def observe(self, now: float, requests: int, tokens: int) -> None:
        """Count a grant (or, negative, a give-back) in the current one-second slot of the last minute."""
        sec = int(now // 1000)
        slot = sec % OBS_SLOTS
        if self.obs_sec[slot] != sec:
            self.obs_sec[slot], self.obs_req[slot], self.obs_tok[slot] = sec, requests, tokens
        else:
            self.obs_req[slot] += requests
            self.obs_tok[slot] += tokens

    def observed(self, now: float) -> tuple[int, int]:
        """(requests, tokens) granted in the last 60 s."""
        sec = int(now // 1000)
        observed_rpm = observed_tpm = 0
        for i in range(OBS_SLOTS):
            if sec - OBS_SLOTS < self.obs_sec[i] <= sec:
                observed_rpm += self.obs_req[i]
                observed_tpm += self.obs_tok[i]
        return observed_rpm, observed_tpm


# a provider's bucket levels: RPM, TPM, ITPM, OTPM tokens (ITPM / OTPM 0.0 when the limits do not set them)
Levels = tuple[float, float, float, float]


def refill(b: ProviderCell, limits: ProviderLimits, now: float) -> Levels:
    """Current levels: continuously refilled, clamped to the (possibly lowered) capacity."""
    rc, tc, ic, oc = limits.rpm_capacity, limits.tpm_capacity, limits.itpm_capacity, limits.otpm_capacity
    if b.rpm is None:
        return rc, tc, ic, oc
    elapsed = max(0.0, now - b.ts)
    slow_r, slow_t = b.slowdowns(limits)
    return (
        slowed_level(b.rpm, b.ts, now, limits.rpm_per_ms, rc, slow_r),
        slowed_level(b.tpm, b.ts, now, limits.tpm_per_ms, tc, slow_t),
        ic if b.itpm is None else min(ic, b.itpm + elapsed * limits.itpm_per_ms),
        oc if b.otpm is None else min(oc, b.otpm + elapsed * limits.otpm_per_ms),
    )


def put(b: ProviderCell, limits: ProviderLimits, levels: Levels, now: float) -> None:
    """Store the levels at ``now`` (an ITPM / OTPM bucket the limits do not set is kept as full, so
    setting itpm later starts from a full bucket, not from a stale level)."""
    b.rpm, b.tpm, b.ts = levels[0], levels[1], now
    b.itpm = levels[2] if limits.itpm else None
    b.otpm = levels[3] if limits.otpm else None


def wait_ms_for(
    limits: ProviderLimits,
    levels: Levels,
    paused_until: float,
    now: float,
    need: tuple[int, int, int],
    slow: tuple[Slowdown | None, Slowdown | None] = (None, None),
) -> float:
    """ms until every bucket holds what ``need`` (TPM, ITPM, OTPM tokens; and 1 request) asks, and any
    429 pause is over: the longest of the waits (RPM / TPM at their adjusted refill, ``slow``)."""
    rpm, tpm, itpm, otpm = levels
    n, ni, no = need
    wait = max(0.0, paused_until - now)
    wait = max(wait, slowed_wait(rpm, 1, now, limits.rpm_per_ms, slow[0]))
    wait = max(wait, slowed_wait(tpm, n, now, limits.tpm_per_ms, slow[1]))
    if limits.itpm and itpm < ni - EPS:
        wait = max(wait, (ni - itpm) / limits.itpm_per_ms)
    if limits.otpm and otpm < no - EPS:
        wait = max(wait, (no - otpm) / limits.otpm_per_ms)
    return wait


class LocalState:
    """Every provider's cell, the clock and the lock that guards them (hold ``lock`` around cell use)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self._cells: dict[str, ProviderCell] = {}
        # provider -> (its pause, the store-clock ms it ends at, None: until lifted). Kept apart from the
        # cells' limits so a pause outlives any change of the provider's limits.
        self._pauses: dict[str, tuple[PauseState, float | None]] = {}

    def now_ms(self) -> float:
        return self.clock() * 1000.0

    def cell(self, name: str) -> ProviderCell:
        """The provider's cell, created (full buckets, no leases) on first use. Caller holds the lock."""
        b = self._cells.get(name)
        if b is None:
            b = self._cells[name] = ProviderCell()
        return b

    def pause(self, name: str, now: float) -> PauseState | None:
        """The provider's pause, if one holds at ``now`` (an expired one is dropped). Caller holds the lock."""
        held = self._pauses.get(name)
        if held is None:
            return None
        if held[1] is not None and held[1] <= now:
            del self._pauses[name]
            return None
        return held[0]

    def set_pause(self, pause: PauseState, now: float) -> bool:
        """Hold ``pause`` (its wall-clock end turned into this store's clock) unless the pause already
        held lasts longer; True if set. Caller holds the lock."""
        held = self.pause(pause.provider, now)
        if held is not None and held.outlasts(pause.until_epoch):
            return False
        until = None if pause.until_epoch is None else now + (pause.until_epoch - time.time()) * 1000.0
        self._pauses[pause.provider] = (pause, until)
        return True

    def lift_pause(self, name: str, now: float) -> bool:
        """Drop the provider's pause; True if one held. Caller holds the lock."""
        held = self.pause(name, now)
        self._pauses.pop(name, None)
        return held is not None

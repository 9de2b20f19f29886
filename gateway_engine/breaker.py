"""Per-provider circuit breaker, shared by every worker through Redis (or in-process in single-process mode).

States: closed → open → half_open → closed (or back to open).

* closed: every call is allowed. It opens after ``consecutive_failures`` failures in a row, or when at
  least ``min_requests`` calls in the current ``window_seconds`` window failed at ``failure_ratio`` or more.
* open: calls are refused until ``open_until``. The cooldown starts at ``cooldown_seconds`` and doubles
  each time the breaker re-opens without a success in between (capped at ``max_cooldown_seconds``;
  the ladder ``cooldown_ladder_ms`` is computed once, by gateway_engine/backoff.py, for both breakers).
  An item whose failure finds the breaker open waits for it, not for its retry backoff as well
  (attempts.py: the cooldown replaces the backoff).
  A Retry-After from the provider can lengthen an open period, never shorten it.
* half_open: after the cooldown ONE probe call is let through (the probe slot lasts ``probe_ttl_seconds`` so a
  crashed prober doesn't wedge it); its success closes the breaker, its failure re-opens it. The breaker
  keeps who was granted the latest probe (``allow(prober=)``, a batch id) and names it in refusals, so
  the engine can hand the next probe to another batch (docs/engine.md "Failure isolation").

Failures are 5xx, timeouts, connection errors, unreadable answers and ``overloaded`` (an Anthropic 529, a
Gemini 503 UNAVAILABLE: load across all customers, so items should move to the next provider). 429s
(quota, handled by the quota pool's penalty), billing / per-day answers (the provider pause) and other
4xx (the item's own fault) are not health signals (the ``breaker_failure`` column of gateway_engine/error_kinds.py).

Clocks: the Redis breaker (gateway_engine.breaker_redis) uses the Redis server's TIME, so all workers
agree. This module holds the state machine, its value types and the in-process LocalBreaker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .backoff import ladder
from .errors import Unavailable
from .protocols import Clock

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
log = logging.getLogger(__name__)


def log_transition(provider: str, before: str, after: str, retry_after_seconds: float | None = None) -> None:
    """One structured event when a breaker opens or closes (docs/operations.md)."""
    if before == after or after == HALF_OPEN:
        return
    event = "breaker_opened" if after == OPEN else "breaker_closed"
    fields: dict[str, str | float] = {
        "event": event,
        "provider": provider,
        "from_state": before,
        "to_state": after,
    }
    if after == OPEN and retry_after_seconds:
        fields["retry_after_seconds"] = retry_after_seconds
    (log.warning if after == OPEN else log.info)("circuit breaker %s for %s", after, provider, extra=fields)


class BreakerUnavailable(Unavailable):
    """The shared breaker state (Redis) cannot be reached."""

    code = "breaker_unavailable"


@dataclass(frozen=True)
class BreakerConfig:
    consecutive_failures: int = 5
    window_seconds: float = 30.0
    min_requests: int = 20
    failure_ratio: float = 0.5
    cooldown_seconds: float = 5.0
    max_cooldown_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.consecutive_failures < 1 or self.min_requests < 1:
            raise ValueError("BreakerConfig: consecutive_failures and min_requests must be >= 1")
        if not 0 < self.failure_ratio <= 1:
            raise ValueError("BreakerConfig.failure_ratio must be in (0, 1]")
        if self.window_seconds <= 0 or self.cooldown_seconds <= 0 or self.max_cooldown_seconds <= 0:
            raise ValueError("BreakerConfig: window and cooldowns must be > 0")


@dataclass(frozen=True)
class Permit:
    allowed: bool
    state: str
    wait_seconds: float = 0.0  # when refused: until the breaker may let a probe through
    probe: bool = False  # this call is the half-open probe
    last_prober: str = ""  # when refused: who was granted the latest probe (``allow(prober=)``)


@dataclass(frozen=True)
class BreakerState:
    provider: str
    state: str
    consecutive_failures: int
    window_requests: int
    window_failures: int
    open_remaining_ms: int
    opened_count: int  # re-opens since the last success (drives the cooldown growth)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- the state machine, in Python (local breaker) -----------------------------------------------------


@dataclass
class Counters:
    state: str = CLOSED
    consec: int = 0
    win_start: float = 0.0
    win_total: int = 0
    win_fail: int = 0
    open_until: float = 0.0
    probe_until: float = 0.0
    opens: int = 0
    prober: str = ""  # who was granted the latest half-open probe


def cooldown_ladder_ms(cfg: BreakerConfig) -> tuple[float, ...]:
    """The open period after the 1st, 2nd, … re-open without a success between, in ms, up to the first
    at the cap (later re-opens stay there): both breakers index it, the Lua one gets it as an argument."""
    return tuple(seconds * 1000.0 for seconds in ladder(cfg.cooldown_seconds, cfg.max_cooldown_seconds))


def _cooldown_ms(cfg: BreakerConfig, opens: int) -> float:
    steps = cooldown_ladder_ms(cfg)
    return steps[min(max(opens, 1), len(steps)) - 1]


def _allow(s: Counters, now: float, probe_ttl_ms: float, prober: str = "") -> Permit:
    if s.state == OPEN:
        if now < s.open_until:
            return Permit(False, OPEN, (s.open_until - now) / 1000.0, last_prober=s.prober)
        s.state, s.probe_until, s.prober = HALF_OPEN, now + probe_ttl_ms, prober
        return Permit(True, HALF_OPEN, probe=True)
    if s.state == HALF_OPEN:
        if now < s.probe_until:
            return Permit(False, HALF_OPEN, (s.probe_until - now) / 1000.0, last_prober=s.prober)
        s.probe_until, s.prober = now + probe_ttl_ms, prober
        return Permit(True, HALF_OPEN, probe=True)
    return Permit(True, CLOSED)


def _open(s: Counters, cfg: BreakerConfig, now: float, retry_after_ms: float) -> None:
    s.opens += 1
    s.state = OPEN
    s.open_until = max(s.open_until, now + _cooldown_ms(cfg, s.opens), now + retry_after_ms)
    s.consec, s.win_start, s.win_total, s.win_fail = 0, now, 0, 0


def _record(s: Counters, cfg: BreakerConfig, now: float, ok: bool, retry_after_ms: float) -> str:
    if now - s.win_start > cfg.window_seconds * 1000.0:
        s.win_start, s.win_total, s.win_fail = now, 0, 0
    s.win_total += 1
    if ok:
        s.consec = 0
        if s.state == HALF_OPEN:
            s.state, s.opens, s.probe_until = CLOSED, 0, 0.0
            s.win_start, s.win_total, s.win_fail = now, 0, 0
        return s.state
    s.win_fail += 1
    s.consec += 1
    if s.state == HALF_OPEN:
        _open(s, cfg, now, retry_after_ms)
    elif s.state == OPEN:
        # a late failure of a call sent before the breaker opened: only a Retry-After may lengthen it
        s.open_until = max(s.open_until, now + retry_after_ms)
    elif s.consec >= cfg.consecutive_failures or (
        s.win_total >= cfg.min_requests and s.win_fail >= cfg.failure_ratio * s.win_total
    ):
        _open(s, cfg, now, retry_after_ms)
    return s.state


def state_view(name: str, s: Counters, now: float) -> BreakerState:
    state = s.state
    if state == OPEN and now >= s.open_until:
        state = HALF_OPEN  # the next call will be the probe
    return BreakerState(
        provider=name,
        state=state,
        consecutive_failures=s.consec,
        window_requests=s.win_total,
        window_failures=s.win_fail,
        open_remaining_ms=int(max(0.0, s.open_until - now)) if s.state == OPEN else 0,
        opened_count=s.opens,
    )


class LocalBreaker:
    """In-process breaker (single-process mode and the plain-Python batcher)."""

    backend = "local"

    def __init__(self, config: BreakerConfig | None = None, clock: Clock = time.monotonic):
        self.config = config or BreakerConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, Counters] = {}

    def _now(self) -> float:
        return self._clock() * 1000.0

    def _s(self, name: str) -> Counters:
        s = self._states.get(name)
        if s is None:
            s = self._states[name] = Counters(win_start=self._now())
        return s

    async def allow(self, provider: str, probe_ttl_seconds: float = 30.0, *, prober: str = "") -> Permit:
        with self._lock:
            return _allow(self._s(provider), self._now(), probe_ttl_seconds * 1000.0, prober)

    async def record(self, provider: str, ok: bool, retry_after_seconds: float | None = None) -> str:
        with self._lock:
            before = self._s(provider).state
            after = _record(
                self._s(provider), self.config, self._now(), ok, (retry_after_seconds or 0.0) * 1000
            )
        log_transition(provider, before, after, retry_after_seconds)
        return after

    def success_part(self, provider: str) -> None:
        """No step to fold into a store's settle: this breaker costs no round trip (breaker_redis.py)."""
        return None

    def learn_folded(self, provider: str, reply: Any) -> str:
        """Never called (``success_part`` is None): the state Redis' SETTLE answered, as RedisBreaker."""
        return str(reply[1])

    def snapshot_sync(self, providers: Iterable[str]) -> dict[str, BreakerState]:
        with self._lock:
            now = self._now()
            return {
                name: state_view(name, self._states.get(name) or Counters(win_start=now), now)
                for name in providers
            }

    async def aclose(self) -> None:
        return None

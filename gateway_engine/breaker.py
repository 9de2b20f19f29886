"""Per-provider circuit breaker, shared by every worker through Redis (or in-process in single-process mode).

States: closed → open → half_open → closed (or back to open).

* closed: every call is allowed. It opens after ``consecutive_failures`` failures in a row, or when at
  least ``min_requests`` calls in the current ``window_seconds`` window failed at ``failure_ratio`` or more.
* open: calls are refused until ``open_until``. The cooldown starts at ``cooldown_seconds`` and doubles
  each time the breaker re-opens without a success in between (capped at ``max_cooldown_seconds``).
  A Retry-After from the provider can lengthen an open period, never shorten it.
* half_open: after the cooldown ONE probe call is let through (the probe slot lasts ``probe_ttl_seconds`` so a
  crashed prober doesn't wedge it); its success closes the breaker, its failure re-opens it.

Failures are 5xx, timeouts, connection errors and unreadable answers. 429s (quota, handled by the quota
pool's penalty) and other 4xx (the item's own fault) are not health signals.

Clocks: the Redis breaker uses the Redis server's TIME, so all workers agree.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .errors import Unavailable
from .protocols import Clock
from .redis_errors import REDIS_ERRORS

if TYPE_CHECKING:
    from .quota.resp import Arg, Reply, RespClient

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
log = logging.getLogger(__name__)
_UNREACHABLE: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError)  # the RESP client's socket too


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
class _S:
    state: str = CLOSED
    consec: int = 0
    win_start: float = 0.0
    win_total: int = 0
    win_fail: int = 0
    open_until: float = 0.0
    probe_until: float = 0.0
    opens: int = 0


def _cooldown_ms(cfg: BreakerConfig, opens: int) -> float:
    factor: int = 2 ** max(0, opens - 1)  # int ** int is typed Any (a negative power is a float)
    return min(cfg.max_cooldown_seconds, cfg.cooldown_seconds * factor) * 1000.0


def _allow(s: _S, now: float, probe_ttl_ms: float) -> Permit:
    if s.state == OPEN:
        if now < s.open_until:
            return Permit(False, OPEN, (s.open_until - now) / 1000.0)
        s.state, s.probe_until = HALF_OPEN, now + probe_ttl_ms
        return Permit(True, HALF_OPEN, probe=True)
    if s.state == HALF_OPEN:
        if now < s.probe_until:
            return Permit(False, HALF_OPEN, (s.probe_until - now) / 1000.0)
        s.probe_until = now + probe_ttl_ms
        return Permit(True, HALF_OPEN, probe=True)
    return Permit(True, CLOSED)


def _open(s: _S, cfg: BreakerConfig, now: float, retry_after_ms: float) -> None:
    s.opens += 1
    s.state = OPEN
    s.open_until = max(s.open_until, now + _cooldown_ms(cfg, s.opens), now + retry_after_ms)
    s.consec, s.win_start, s.win_total, s.win_fail = 0, now, 0, 0


def _record(s: _S, cfg: BreakerConfig, now: float, ok: bool, retry_after_ms: float) -> str:
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


def _state_view(name: str, s: _S, now: float) -> BreakerState:
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
        self._states: dict[str, _S] = {}

    def _now(self) -> float:
        return self._clock() * 1000.0

    def _s(self, name: str) -> _S:
        s = self._states.get(name)
        if s is None:
            s = self._states[name] = _S(win_start=self._now())
        return s

    async def allow(self, provider: str, probe_ttl_seconds: float = 30.0) -> Permit:
        with self._lock:
            return _allow(self._s(provider), self._now(), probe_ttl_seconds * 1000.0)

    async def record(self, provider: str, ok: bool, retry_after_seconds: float | None = None) -> str:
        with self._lock:
            before = self._s(provider).state
            after = _record(
                self._s(provider), self.config, self._now(), ok, (retry_after_seconds or 0.0) * 1000
            )
        log_transition(provider, before, after, retry_after_seconds)
        return after

    def snapshot_sync(self, providers: Iterable[str]) -> dict[str, BreakerState]:
        with self._lock:
            now = self._now()
            return {
                name: _state_view(name, self._states.get(name) or _S(win_start=now), now)
                for name in providers
            }

    async def aclose(self) -> None:
        return None


# ---- the same state machine in Lua (Redis breaker) ------------------------------------------------

_LUA = r"""
local key = KEYS[1]
local op = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', key, 'state', 'consec', 'win_start', 'win_total', 'win_fail',
                     'open_until', 'probe_until', 'opens')
local state = h[1] or 'closed'
local consec = tonumber(h[2] or '0')
local win_start = tonumber(h[3] or tostring(now))
local win_total = tonumber(h[4] or '0')
local win_fail = tonumber(h[5] or '0')
local open_until = tonumber(h[6] or '0')
local probe_until = tonumber(h[7] or '0')
local opens = tonumber(h[8] or '0')
-- config
local c_consec = tonumber(ARGV[2])
local c_window = tonumber(ARGV[3])
local c_min = tonumber(ARGV[4])
local c_ratio = tonumber(ARGV[5])
local c_cool = tonumber(ARGV[6])
local c_maxcool = tonumber(ARGV[7])
local arg = tonumber(ARGV[8])        -- allow: probe ttl ms; record: retry_after ms
local ok = ARGV[9] == '1'

local function save()
  redis.call('HSET', key, 'state', state, 'consec', consec, 'win_start', win_start, 'win_total', win_total,
             'win_fail', win_fail, 'open_until', open_until, 'probe_until', probe_until, 'opens', opens)
  redis.call('PEXPIRE', key, math.max(c_window, c_maxcool) * 4 + 600000)
end

local function do_open()
  opens = opens + 1
  local cool = math.min(c_maxcool, c_cool * math.pow(2, math.max(0, opens - 1)))
  state = 'open'
  open_until = math.max(open_until, now + cool, now + arg)
  consec = 0; win_start = now; win_total = 0; win_fail = 0
end

if op == 'allow' then
  if state == 'open' then
    if now < open_until then return {0, state, open_until - now, 0} end
    state = 'half_open'; probe_until = now + arg; save()
    return {1, state, 0, 1}
  end
  if state == 'half_open' then
    if now < probe_until then return {0, state, probe_until - now, 0} end
    probe_until = now + arg; save()
    return {1, state, 0, 1}
  end
  return {1, 'closed', 0, 0}
elseif op == 'record' then
  local before = state
  if now - win_start > c_window then win_start = now; win_total = 0; win_fail = 0 end
  win_total = win_total + 1
  if ok then
    consec = 0
    if state == 'half_open' then
      state = 'closed'; opens = 0; probe_until = 0; win_start = now; win_total = 0; win_fail = 0
    end
  else
    win_fail = win_fail + 1
    consec = consec + 1
    if state == 'half_open' then
      do_open()
    elseif state == 'open' then
      open_until = math.max(open_until, now + arg)
    elseif consec >= c_consec or (win_total >= c_min and win_fail >= c_ratio * win_total) then
      do_open()
    end
  end
  save()
  return {1, state, 0, before}
else
  return {now, state, consec, win_total, win_fail, open_until, opens}
end
"""


def breaker_key(prefix: str, provider: str) -> str:
    return f"{prefix}breaker:{{{provider}}}"


class RedisBreaker:
    """The breaker shared by every worker. One redis.asyncio client per running event loop."""

    backend = "redis"

    def __init__(
        self,
        url: str,
        prefix: str = "bgw:",
        config: BreakerConfig | None = None,
        *,
        connect_timeout: float = 2.0,
        command_timeout: float = 5.0,
    ):
        self.url, self.prefix = url, prefix
        self.config = config or BreakerConfig()
        self.connect_timeout, self.command_timeout = connect_timeout, command_timeout
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RespClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        from .quota.resp import Script

        self._script = Script(_LUA)

    def _client(self) -> RespClient:
        """One multiplexed connection per event loop (the quota store's pipelining client): breaker
        calls from many coroutines share it instead of checking connections out of a bounded pool."""
        from .quota.resp import RespClient

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            with self._lock:
                client = self._clients.get(loop)
                if client is None:
                    client = self._clients[loop] = RespClient(
                        self.url, connect_timeout=self.connect_timeout, command_timeout=self.command_timeout
                    )
        return client

    def _args(self, op: str, arg_ms: float, ok: bool = False) -> list[Arg]:
        c = self.config
        return [
            op,
            c.consecutive_failures,
            c.window_seconds * 1000.0,
            c.min_requests,
            c.failure_ratio,
            c.cooldown_seconds * 1000.0,
            c.max_cooldown_seconds * 1000.0,
            float(arg_ms),
            "1" if ok else "0",
        ]

    async def _eval(self, provider: str, args: list[Arg]) -> Reply:
        try:
            return await self._script(self._client(), [breaker_key(self.prefix, provider)], args)
        except _UNREACHABLE as exc:
            raise BreakerUnavailable(
                f"circuit breaker state unavailable: cannot reach Redis ({exc})"
            ) from exc

    async def allow(self, provider: str, probe_ttl_seconds: float = 30.0) -> Permit:
        allowed, state, wait_ms, probe = await self._eval(
            provider, self._args("allow", probe_ttl_seconds * 1000)
        )
        state = state.decode() if isinstance(state, bytes) else state
        return Permit(bool(int(allowed)), state, float(wait_ms) / 1000.0, bool(int(probe)))

    async def record(self, provider: str, ok: bool, retry_after_seconds: float | None = None) -> str:
        result = await self._eval(provider, self._args("record", (retry_after_seconds or 0.0) * 1000, ok))
        state, before = (v.decode() if isinstance(v, bytes) else str(v) for v in (result[1], result[3]))
        log_transition(provider, before, state, retry_after_seconds)
        return state

    def snapshot_sync(self, providers: Iterable[str]) -> dict[str, BreakerState]:
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)
        try:
            script = client.register_script(_LUA)
            out = {}
            for name in providers:
                now, state, consec, total, fail, open_until, opens = script(
                    keys=[breaker_key(self.prefix, name)], args=self._args("peek", 0)
                )
                s = _S(
                    state=state.decode() if isinstance(state, bytes) else state,
                    consec=int(consec),
                    win_total=int(total),
                    win_fail=int(fail),
                    open_until=float(open_until),
                    opens=int(opens),
                )
                out[name] = _state_view(name, s, float(now))
            return out
        finally:
            client.close()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

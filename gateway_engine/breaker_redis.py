"""The circuit breaker shared by every worker: the state machine of gateway_engine.breaker in one Lua
script, evaluated atomically on Redis with the server's clock. Its cooldown ladder is an argument,
computed in Python (``breaker.cooldown_ladder_ms``, gateway_engine/backoff.py), never a copy of the
formula in Lua.

Known closed: every script call answers the breaker's state. While this process's last answer for a
provider said ``closed`` and is younger than ``KNOWN_CLOSED_SECONDS``, ``allow`` answers "allowed"
without asking Redis (on the happy path each success's ``record`` renews the knowledge, so no allow
round trip is sent at all). A breaker opened by another worker is therefore honoured here within that
bound — or at once, when a call of this process records its outcome and learns the state. Open and
half-open are never answered locally: the cooldown and the one-probe rule stay in Redis.

Folded successes: ``success_part`` hands the quota store this breaker's "record a success" step for a
provider (the state machine as a Lua function, its key in the provider's hash slot, its arguments), which
the store runs inside the same SETTLE script as the grant's reconcile (quota/lua.py ``settle_script``);
``learn_folded`` takes the answer, and the next ``record(provider, ok=True)`` of this process is then
answered from it instead of being sent again (one success, one state change, one round trip less)."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Iterable

from .breaker import (
    CLOSED,
    BreakerConfig,
    BreakerState,
    BreakerUnavailable,
    Counters,
    Permit,
    cooldown_ladder_ms,
    log_transition,
    state_view,
)
from .protocols import Clock
from .quota.resp import Arg, Reply, RespClient, Script
from .quota.types import SettleOutcome
from .redis_errors import REDIS_ERRORS
from .redis_target import sync_client

__all__ = ["KNOWN_CLOSED_SECONDS", "RedisBreaker", "breaker_key"]

# how long this process trusts its last "closed" answer for a provider (docs/engine.md "Failure isolation")
KNOWN_CLOSED_SECONDS = 0.25

_UNREACHABLE: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError)  # the RESP client's socket too


# ---- the same state machine in Lua (Redis breaker) ------------------------------------------------

# The state machine as one Lua function, ``outcome(key, a)``: its ARGV start at index ``a`` (op, config,
# arg, ok, asker). The breaker's own script calls it on KEYS[1] from ARGV[1]; the quota store's SETTLE
# runs it after RECONCILE in the same atomic script (``success_part``).
BREAKER_FUNCTION = r"""
local function outcome(key, a)
  local op = ARGV[a]
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local h = redis.call('HMGET', key, 'state', 'consec', 'win_start', 'win_total', 'win_fail',
                       'open_until', 'probe_until', 'opens', 'prober')
  local state = h[1] or 'closed'
  local consec = tonumber(h[2] or '0')
  local win_start = tonumber(h[3] or tostring(now))
  local win_total = tonumber(h[4] or '0')
  local win_fail = tonumber(h[5] or '0')
  local open_until = tonumber(h[6] or '0')
  local probe_until = tonumber(h[7] or '0')
  local opens = tonumber(h[8] or '0')
  local prober = h[9] or ''
  -- config
  local c_consec = tonumber(ARGV[a + 1])
  local c_window = tonumber(ARGV[a + 2])
  local c_min = tonumber(ARGV[a + 3])
  local c_ratio = tonumber(ARGV[a + 4])
  local ladder = {}                    -- the cooldown after the 1st, 2nd, ... re-open (ms; Python's)
  for step in string.gmatch(ARGV[a + 5], '[^,]+') do ladder[#ladder + 1] = tonumber(step) end
  local c_maxcool = tonumber(ARGV[a + 6])
  local arg = tonumber(ARGV[a + 7])        -- allow: probe ttl ms; record: retry_after ms
  local ok = ARGV[a + 8] == '1'
  local asker = ARGV[a + 9] or ''          -- allow: who asks (kept with a probe it is granted)

  local function save()
    redis.call('HSET', key, 'state', state, 'consec', consec, 'win_start', win_start, 'win_total', win_total,
               'win_fail', win_fail, 'open_until', open_until, 'probe_until', probe_until, 'opens', opens,
               'prober', prober)
    redis.call('PEXPIRE', key, math.max(c_window, c_maxcool) * 4 + 600000)
  end

  local function do_open()
    opens = opens + 1
    local cool = ladder[math.min(opens, #ladder)]
    state = 'open'
    open_until = math.max(open_until, now + cool, now + arg)
    consec = 0; win_start = now; win_total = 0; win_fail = 0
  end

  if op == 'allow' then
    if state == 'open' then
      if now < open_until then return {0, state, open_until - now, 0, prober} end
      state = 'half_open'; probe_until = now + arg; prober = asker; save()
      return {1, state, 0, 1, prober}
    end
    if state == 'half_open' then
      if now < probe_until then return {0, state, probe_until - now, 0, prober} end
      probe_until = now + arg; prober = asker; save()
      return {1, state, 0, 1, prober}
    end
    return {1, 'closed', 0, 0, ''}
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
end
"""
_LUA = BREAKER_FUNCTION + "return outcome(KEYS[1], 1)\n"


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
        clock: Clock = time.monotonic,
    ):
        self.url, self.prefix = url, prefix
        self._clock = clock
        self._closed_at: dict[str, float] = {}  # provider -> when (clock) Redis last answered "closed"
        self._folded: dict[str, list[str]] = {}  # provider -> states of successes recorded in a SETTLE
        self.config = config or BreakerConfig()
        self.connect_timeout, self.command_timeout = connect_timeout, command_timeout
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RespClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._script = Script(_LUA)
        self._ladder: tuple[BreakerConfig, str] | None = None

    def _client(self) -> RespClient:
        """One multiplexed connection per event loop (the quota store's pipelining client): breaker
        calls from many coroutines share it instead of checking connections out of a bounded pool."""
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

    def _cooldowns(self) -> str:
        """The cooldown ladder as the script's argument, computed by the Python breaker's helper (the
        script has no formula of its own), once per config."""
        if self._ladder is None or self._ladder[0] is not self.config:
            self._ladder = (self.config, ",".join(str(ms) for ms in cooldown_ladder_ms(self.config)))
        return self._ladder[1]

    def _args(self, op: str, arg_ms: float, ok: bool = False, asker: str = "") -> list[Arg]:
        c = self.config
        return [
            op,
            c.consecutive_failures,
            c.window_seconds * 1000.0,
            c.min_requests,
            c.failure_ratio,
            self._cooldowns(),
            c.max_cooldown_seconds * 1000.0,
            float(arg_ms),
            "1" if ok else "0",
            asker,
        ]

    async def _eval(self, provider: str, args: list[Arg]) -> Reply:
        try:
            return await self._script(self._client(), [breaker_key(self.prefix, provider)], args)
        except _UNREACHABLE as exc:
            raise BreakerUnavailable(
                f"circuit breaker state unavailable: cannot reach Redis ({exc})"
            ) from exc

    def _learn(self, provider: str, state: str) -> None:
        """Keep what Redis just answered: "closed" (and when), or forget it (open, half-open)."""
        if state == CLOSED:
            self._closed_at[provider] = self._clock()
        else:
            self._closed_at.pop(provider, None)

    def known_closed(self, provider: str) -> bool:
        """Whether this process's last answer for ``provider`` said closed, less than
        KNOWN_CLOSED_SECONDS ago (then ``allow`` asks nothing of Redis)."""
        at = self._closed_at.get(provider)
        return at is not None and self._clock() - at < KNOWN_CLOSED_SECONDS

    async def allow(self, provider: str, probe_ttl_seconds: float = 30.0, *, prober: str = "") -> Permit:
        if self.known_closed(provider):
            return Permit(True, CLOSED)
        allowed, state, wait_ms, probe, last = await self._eval(
            provider, self._args("allow", probe_ttl_seconds * 1000, asker=prober)
        )
        state, last = (v.decode() if isinstance(v, bytes) else str(v) for v in (state, last))
        self._learn(provider, state)
        return Permit(bool(int(allowed)), state, float(wait_ms) / 1000.0, bool(int(probe)), last)

    def success_part(self, provider: str) -> SettleOutcome:
        """This breaker's "record one success" step, for the quota store to run inside its SETTLE script
        (``learn_folded`` takes the answer)."""
        return SettleOutcome(
            self.url,
            BREAKER_FUNCTION,
            breaker_key(self.prefix, provider),
            tuple(self._args("record", 0, True)),
        )

    def learn_folded(self, provider: str, reply: Reply) -> str:
        """The answer of a success recorded in the store's SETTLE: learn the state, and answer this
        process's next ``record(provider, ok=True)`` with it instead of sending it again."""
        state, before = (v.decode() if isinstance(v, bytes) else str(v) for v in (reply[1], reply[3]))
        self._learn(provider, state)
        log_transition(provider, before, state)
        self._folded.setdefault(provider, []).append(state)
        return state

    async def record(self, provider: str, ok: bool, retry_after_seconds: float | None = None) -> str:
        folded = self._folded.get(provider) if ok else None
        if folded:  # this success was recorded in the settle (learn_folded)
            state = folded.pop()
            if not folded:
                del self._folded[provider]
            return state
        result = await self._eval(provider, self._args("record", (retry_after_seconds or 0.0) * 1000, ok))
        state, before = (v.decode() if isinstance(v, bytes) else str(v) for v in (result[1], result[3]))
        self._learn(provider, state)
        log_transition(provider, before, state, retry_after_seconds)
        return state

    def snapshot_sync(self, providers: Iterable[str]) -> dict[str, BreakerState]:
        client = sync_client(self.url, socket_timeout=2, socket_connect_timeout=2)
        try:
            script = client.register_script(_LUA)
            out = {}
            for name in providers:
                now, state, consec, total, fail, open_until, opens = script(
                    keys=[breaker_key(self.prefix, name)], args=self._args("peek", 0)
                )
                s = Counters(
                    state=state.decode() if isinstance(state, bytes) else state,
                    consec=int(consec),
                    win_total=int(total),
                    win_fail=int(fail),
                    open_until=float(open_until),
                    opens=int(opens),
                )
                out[name] = state_view(name, s, float(now))
            return out
        finally:
            client.close()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

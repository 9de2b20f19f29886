"""Where the SFQ state (virtual time per provider, finish tag per team) lives: Redis when workers share
it, this process otherwise. The rules themselves are batches.scheduling.fair (pure)."""

from __future__ import annotations

import threading

from django.conf import settings

from batches.scheduling import FairState, charge
from gateway_site.redis import sync_redis

# F = max(V, F_team) + n / weight; V = max(V, start) — the Redis twin of batches.scheduling.fair.charge
_CHARGE_LUA = """
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local f = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local s = math.max(v, f)
local nf = s + tonumber(ARGV[2]) / math.max(1, tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.17g', nf))
if s > v then redis.call('HSET', KEYS[1], 'v', string.format('%.17g', s)) end
redis.call('EXPIRE', KEYS[1], 86400)
return string.format('%.17g', nf)
"""


class LocalFairClock:
    """Single-process mode: one state per provider in this process."""

    def __init__(self) -> None:
        self._states: dict[str, FairState] = {}
        self._lock = threading.Lock()

    def state(self, provider: str) -> FairState:
        with self._lock:
            s = self._states.setdefault(provider, FairState())
            return FairState(s.vtime, dict(s.finish))

    def charge(self, provider: str, team: str, items: int, weight: int) -> None:
        with self._lock:
            charge(self._states.setdefault(provider, FairState()), team, items, weight)


class RedisFairClock:
    """Shared by every dispatcher: hash ``<prefix>sfq:<provider>`` = {"v": V, "t:<team>": F}."""

    def __init__(self, client) -> None:
        self.client = client
        self.prefix = f"{settings.GATEWAY_REDIS_PREFIX}sfq:"
        self._charge = client.register_script(_CHARGE_LUA)

    def state(self, provider: str) -> FairState:
        raw = self.client.hgetall(self.prefix + provider)
        state = FairState()
        for key, value in raw.items():
            key = key.decode() if isinstance(key, bytes) else key
            if key == "v":
                state.vtime = float(value)
            elif key.startswith("t:"):
                state.finish[key[2:]] = float(value)
        return state

    def charge(self, provider: str, team: str, items: int, weight: int) -> None:
        self._charge(keys=[self.prefix + provider], args=[f"t:{team}", items, weight])


_local_clock = LocalFairClock()


def fair_clock():
    if settings.GATEWAY_QUOTA_BACKEND == "redis":
        return RedisFairClock(redis_client())
    return _local_clock


def redis_client():
    return sync_redis(timeout=3)

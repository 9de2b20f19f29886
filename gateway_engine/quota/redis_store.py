"""Redis quota store: buckets and leases shared by every worker process (see lua.py for the scripts)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable
from urllib.parse import urlsplit, urlunsplit

from ..redis_errors import REDIS_ERRORS
from . import lua
from .base import BaseQuotaStore, log_pause
from .resp import Arg, Reply, RespClient, Script
from .types import CONFIG_VERSION_KEY, Decision, ProviderLimits, ProviderQuotaState, QuotaStoreUnavailable

# the raw RESP client's socket errors beside redis-py's
_UNAVAILABLE: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError)


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


class RedisQuotaStore(BaseQuotaStore):
    backend = "redis"

    def __init__(
        self,
        url: str,
        prefix: str = "bgw:",
        global_max_in_flight: int | None = None,
        command_timeout: float = 5.0,
        connect_timeout: float = 2.0,
        cluster_max_in_flight: int | None = None,
    ):
        super().__init__(global_max_in_flight, cluster_max_in_flight)
        self.url = url
        self.prefix = prefix
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        # A client's connection is bound to the loop that opened it: one client per running loop.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RespClient] = (
            weakref.WeakKeyDictionary()
        )
        self._clients_lock = threading.Lock()
        # EVALSHA; on NOSCRIPT (after a Redis restart or SCRIPT FLUSH) SCRIPT LOAD and EVALSHA again.
        self._scripts = {
            name: Script(getattr(lua, name))
            for name in (
                "ACQUIRE",
                "RECONCILE",
                "RELEASE",
                "PENALIZE",
                "UNPAUSE",
                "SNAPSHOT",
                "LEASE_ACQUIRE",
                "LEASE_PEEK",
                "LEASE_REFRESH",
                "BUDGET_RESERVE",
                "BUDGET_ADJUST",
            )
        }

    # ---- plumbing ----------------------------------------------------------------------------------
    def client(self) -> RespClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            with self._clients_lock:
                client = self._clients.get(loop)
                if client is None:
                    client = RespClient(self.url, self.connect_timeout, self.command_timeout)
                    self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def _unavailable(self, exc: BaseException) -> QuotaStoreUnavailable:
        return QuotaStoreUnavailable(
            f"quota store unavailable: cannot reach Redis at {redact_url(self.url)} ({exc.__class__.__name__}: "
            f"{exc}). Shared RPM/TPM limits cannot be enforced, so nothing is sent; the item stays retryable."
        )

    async def _run(self, script: str, keys: list[str], args: list[Arg]) -> Reply:
        try:
            return await self._scripts[script](self.client(), keys, args)
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    async def _await(self, reply: Awaitable[Reply]) -> Reply:
        try:
            return await reply
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    def command(self, *args: Arg) -> Awaitable[Reply]:
        """One plain Redis command on this loop's connection, sent at once (pipelined with whatever is
        sent before its reply is awaited); QuotaStoreUnavailable when Redis is unreachable. For the
        attempt journal (gateway_engine.journal), which lives beside the buckets."""
        return self._command(*args)

    def _command(self, *args: Arg) -> Awaitable[Reply]:
        """Sends the command at once (when connected); returns an awaitable for the reply."""
        try:
            return self._await(self.client().call(*args))
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    def _keys(self, name: str) -> tuple[str, str, str]:
        base = f"{self.prefix}q:{{{name}}}:"
        return base + "b", base + "o", base + "l"

    @staticmethod
    def _rates(limits: ProviderLimits) -> list[Arg]:
        return [
            repr(limits.rpm_per_ms),
            repr(float(limits.rpm_capacity)),
            repr(limits.tpm_per_ms),
            repr(float(limits.tpm_capacity)),
        ]

    def _bucket_call(self, limits: ProviderLimits, tokens: int) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV of ACQUIRE/RELEASE: the provider's buckets, plus the team share bucket."""
        bucket, obs, _ = self._keys(limits.name)
        keys, args = [bucket, obs], [*self._rates(limits), int(tokens)]
        if limits.team_capped:
            keys.append(f"{self.prefix}q:{{{limits.name}}}:tm:{limits.team}")
            args += [repr(limits.team_rpm_per_ms), repr(float(limits.team_rpm_capacity))]
        return keys, args

    def _budget_key(self, team: str, suffix: str) -> str:
        return f"{self.prefix}budget:{{{team}}}:{suffix}"

    async def _budget_try(self, keys: list[str], tokens: int, limits: list[int]) -> tuple[int, int, int]:
        reply = await self._run("BUDGET_RESERVE", keys, [int(tokens), *limits])
        status = int(reply[0])
        return status, (int(reply[1]) - 1 if status else 0), (int(reply[2]) if status == 1 else 0)

    async def _budget_adjust(self, keys: list[str], delta: int) -> None:
        await self._run("BUDGET_ADJUST", keys, [int(delta)])

    async def _budget_get(self, keys: list[str]) -> list[int | None]:
        values = await self._command("MGET", *keys)
        return [None if v is None else int(v) for v in values]

    async def _budget_delete(self, keys: list[str]) -> None:
        await self._command("DEL", *keys)

    async def _budget_seed(self, key: str, used: int, ttl_seconds: int) -> None:
        await self._command("SET", key, int(used), "NX", "EX", max(1, int(ttl_seconds)))

    # ---- primitives --------------------------------------------------------------------------------
    async def try_acquire(self, limits: ProviderLimits, tokens: int = 0) -> Decision:
        status, wait_ms, now = await self._run("ACQUIRE", *self._bucket_call(limits, tokens))
        status = int(status)
        return Decision(status == 0, int(wait_ms), float(now), impossible=status == 2)

    async def _reconcile_delta(self, limits: ProviderLimits, delta_tokens: int) -> None:
        bucket, obs, _ = self._keys(limits.name)
        await self._run("RECONCILE", [bucket, obs], [*self._rates(limits), int(delta_tokens)])

    async def _release(self, limits: ProviderLimits, tokens: int) -> None:
        await self._run("RELEASE", *self._bucket_call(limits, tokens))

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        bucket, _, _ = self._keys(limits.name)
        ms = max(0.0, float(retry_after_seconds)) * 1000.0
        log_pause(limits.name, retry_after_seconds)
        return int(float(await self._run("PENALIZE", [bucket], [*self._rates(limits), repr(ms)])))

    async def clear_pause(self, limits: ProviderLimits) -> None:
        bucket, _, _ = self._keys(limits.name)
        await self._run("UNPAUSE", [bucket], [])

    async def _lease_try(self, limits: ProviderLimits, lease_id: str) -> int:
        _, _, leases = self._keys(limits.name)
        ttl_ms = int(limits.lease_ttl_seconds * 1000)
        return int(await self._run("LEASE_ACQUIRE", [leases], [lease_id, limits.max_concurrency, ttl_ms]))

    async def _lease_peek(self, limits: ProviderLimits) -> int:
        _, _, leases = self._keys(limits.name)
        return int(await self._run("LEASE_PEEK", [leases], [limits.max_concurrency]))

    async def _lease_refresh(self, limits: ProviderLimits, lease_id: str) -> bool:
        _, _, leases = self._keys(limits.name)
        ttl_ms = int(limits.lease_ttl_seconds * 1000)
        return int(await self._run("LEASE_REFRESH", [leases], [lease_id, ttl_ms])) == 1

    def _lease_release(self, limits: ProviderLimits, lease_id: str) -> Awaitable[None]:
        # not `async def`: ZREM is on the wire before the caller first awaits, even if it is cancelled
        _, _, leases = self._keys(limits.name)
        return self._command("ZREM", leases, lease_id)

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        bucket, obs, leases = self._keys(limits.name)
        r, tk, p, now, wait_ms, in_flight, obs_req, obs_tok = await self._run(
            "SNAPSHOT", [bucket, obs, leases], self._rates(limits)
        )
        paused_until = float(p)
        return ProviderQuotaState(
            provider=limits.name,
            rpm_tokens_available=float(r),
            rpm_capacity=limits.rpm_capacity,
            tpm_tokens_available=float(tk),
            tpm_capacity=limits.tpm_capacity,
            wait_ms=int(wait_ms),
            paused_until_ms=int(paused_until) if paused_until > float(now) else 0,
            leases_in_flight=int(in_flight),
            max_concurrency=limits.max_concurrency,
            configured_rpm=limits.rpm,
            configured_tpm=limits.tpm,
            observed_rpm=int(obs_req),
            observed_tpm=int(obs_tok),
        )

    async def config_version(self) -> int:
        value = await self._command("GET", f"{self.prefix}{CONFIG_VERSION_KEY}")
        return int(value or 0)

    async def ping(self) -> bool:
        return bool(await self._command("PING"))

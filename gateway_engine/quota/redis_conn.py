"""The Redis store's connection: one pipelined RESP client per running event loop, the Lua scripts
(EVALSHA; on NOSCRIPT, SCRIPT LOAD and EVALSHA again), the provider key names, and the mapping of
connection errors to QuotaStoreUnavailable. Shared by the Redis buckets, leases, ledger and config
version (and the attempt journal, gateway_engine.journal, through RedisQuotaStore.command)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable
from urllib.parse import urlsplit, urlunsplit

from ..redis_errors import REDIS_ERRORS
from . import lua, lua_adaptive, lua_leases, lua_team
from .resp import Arg, Reply, RespClient, Script
from .types import PauseState, QuotaStoreUnavailable

# the raw RESP client's socket errors beside redis-py's
_UNAVAILABLE: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError)
SCRIPT_NAMES = (
    "ACQUIRE",
    "ADMIT",
    "INTERACTIVE_MARK",
    "INTERACTIVE_COUNT",
    "RECONCILE",
    "RELEASE",
    "PENALIZE",
    "PAUSE_SET",
    "UNPAUSE",
    "SNAPSHOT",
    "BUDGET_RESERVE",
    "BUDGET_ADJUST",
)
LEASE_SCRIPT_NAMES = ("LEASE_ACQUIRE", "LEASE_PEEK", "LEASE_REFRESH")
ADAPTIVE_SCRIPT_NAMES = ("ADAPT",)
TEAM_SCRIPT_NAMES = ("TEAM_SNAPSHOT",)


def pause_state(provider: str, fields: list[Reply]) -> PauseState:
    """A PauseState from the pause hash's reason, until (epoch ms, empty: until lifted), message, since."""
    reason, until, message, since = (b"" if f is None else f for f in fields)
    return PauseState(
        provider,
        reason.decode(),
        float(until) / 1000.0 if until else None,
        message.decode(),
        float(since or 0) / 1000.0,
    )


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


class RedisConnection:
    """Commands and scripts on this event loop's connection to ``url``, keys under ``prefix``."""

    def __init__(self, url: str, prefix: str, command_timeout: float, connect_timeout: float) -> None:
        self.url = url
        self.prefix = prefix
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        # A client's connection is bound to the loop that opened it: one client per running loop.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RespClient] = (
            weakref.WeakKeyDictionary()
        )
        self._clients_lock = threading.Lock()
        self.scripts = {name: Script(getattr(lua, name)) for name in SCRIPT_NAMES}
        self.scripts.update({name: Script(getattr(lua_leases, name)) for name in LEASE_SCRIPT_NAMES})
        self.scripts.update({name: Script(getattr(lua_adaptive, name)) for name in ADAPTIVE_SCRIPT_NAMES})
        self.scripts.update({name: Script(getattr(lua_team, name)) for name in TEAM_SCRIPT_NAMES})
        self._built: dict[str, Script] = {}  # run_text's scripts

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

    async def run(self, script: str, keys: list[str], args: list[Arg]) -> Reply:
        """Run one of lua.py's scripts (by name)."""
        try:
            return await self.scripts[script](self.client(), keys, args)
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    async def run_text(self, text: str, keys: list[str], args: list[Arg]) -> Reply:
        """Run a script built at run time (lua.settle_script), its Script kept per text."""
        script = self._built.get(text)
        if script is None:
            script = self._built[text] = Script(text)
        try:
            return await script(self.client(), keys, args)
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    async def _await(self, reply: Awaitable[Reply]) -> Reply:
        try:
            return await reply
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    def command(self, *args: Arg) -> Awaitable[Reply]:
        """One plain Redis command on this loop's connection, sent at once (pipelined with whatever is
        sent before its reply is awaited); returns an awaitable for the reply. QuotaStoreUnavailable
        when Redis is unreachable."""
        try:
            return self._await(self.client().call(*args))
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    async def ping(self) -> bool:
        return bool(await self.command("PING"))

    def provider_keys(self, name: str) -> tuple[str, str, str]:
        """The provider's bucket hash, observed-rates hash and lease sorted set (lua.py)."""
        base = f"{self.prefix}q:{{{name}}}:"
        return base + "b", base + "o", base + "l"

    def interactive_key(self, name: str) -> str:
        """The provider's interactive waiters (lua.py): a mark per process with a waiting interactive call."""
        return f"{self.prefix}q:{{{name}}}:iw"

    def share_key(self, provider: str, team: str) -> str:
        """The team's share of the provider's RPM (lua_team.py): in the provider's hash slot."""
        return f"{self.prefix}q:{{{provider}}}:tm:{team}"

    def team_keys(self, team: str) -> tuple[str, str]:
        """The team's RPM / TPM bucket across providers and its observed rates (lua_team.py): the team's
        hash tag, another Redis Cluster slot than the provider's."""
        base = f"{self.prefix}team:{{{team}}}:"
        return base + "rl", base + "ro"

    def pause_key(self, name: str) -> str:
        """The provider pause hash (lua.py): apart from the bucket hash, so limit changes never touch it."""
        return f"{self.prefix}q:{{{name}}}:pause"

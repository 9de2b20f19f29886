"""A small pipelining Redis client for the quota hot path.

Why not redis.asyncio: every command there checks a connection out of a pool, wraps it in retry and
health-check machinery and waits for the reply before the connection serves anyone else. On the
2-core dev box this client did 1.5–3× the sequential and 6–10× the concurrent PINGs/s of redis-py's
asyncio client (bench/quota.py prints both; figures in docs/benchmarks.md). The quota store issues
2–3 tiny commands per provider call from many coroutines at once, which is exactly the multiplexed
case: every caller writes its command at once on one connection per event loop, and replies are
matched to callers in order (Redis answers in order on a connection).

Scope: commands with a single reply (no pub/sub, no blocking commands, no MULTI). Replies are hiredis
values (bytes, int, list). Error replies raise redis.exceptions.ResponseError (NoScriptError for
NOSCRIPT); a failover reply (READONLY, LOADING, MASTERDOWN: gateway_engine/redis_errors.py) raises its
redis-py error, which is in REDIS_ERRORS, and drops the connection: every call pending on it fails the
same way and the next call reconnects (a managed endpoint's new connection reaches the new primary). A
lost or timed-out connection fails every pending call with ConnectionError/TimeoutError and the next
call reconnects.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import ssl as ssl_module
import time
from collections.abc import Callable
from typing import Any, TypeAlias, cast

import hiredis
from redis.asyncio.connection import SSLConnection, UnixDomainSocketConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..redis_errors import failover_error
from ..redis_target import RedisTarget

# A command's arguments, and a reply as hiredis decodes it: bytes | int | None | list of replies (hiredis
# types it Any; callers convert each field with int()/float()/decode() where they read it).
Arg: TypeAlias = str | bytes | int | float
Reply: TypeAlias = Any
_Pending: TypeAlias = "collections.deque[tuple[asyncio.Future[Reply], float]]"


class _Protocol(asyncio.Protocol):
    """One connection's stream: replies matched to pending futures in order. ``on_lost(self)`` is
    called once the connection is gone (closed, lost or aborted), so its client stops using it."""

    def __init__(self, on_lost: Callable[[_Protocol], None]) -> None:
        self.on_lost = on_lost
        self.reader = hiredis.Reader()
        self.pending: _Pending = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed_exc: BaseException | None = None
        self.out: list[bytes] = []  # commands written in this loop iteration, flushed in one send

    def flush(self) -> None:
        out, self.out = self.out, []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(out))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream connection (TCP, TLS or Unix socket): the loop hands over a full Transport
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        pending = self.pending
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self.abort(RedisConnectionError(f"Redis protocol error: {exc}"))
                return
            if reply is False:
                return
            if not pending:  # a reply nobody asked for: the stream is out of sync
                self.abort(RedisConnectionError("unexpected reply from Redis"))
                return
            fut, _ = pending.popleft()
            if fut.done():  # the caller was cancelled; its reply is simply dropped
                continue
            if isinstance(reply, hiredis.ReplyError):
                message = str(reply)
                failover = failover_error(message)
                if failover is not None:  # this server cannot serve us now: reconnect for the next call
                    fut.set_exception(failover)
                    self.abort(failover)
                    return
                fut.set_exception(
                    NoScriptError(message) if message.startswith("NOSCRIPT") else ResponseError(message)
                )
            else:
                fut.set_result(reply)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.fail_all(self.closed_exc or RedisConnectionError(f"connection to Redis lost: {exc or 'closed'}"))
        self.on_lost(self)

    def fail_all(self, exc: BaseException) -> None:
        while self.pending:
            fut, _ = self.pending.popleft()
            if not fut.done():
                fut.set_exception(exc)

    def abort(self, exc: BaseException) -> None:
        self.closed_exc = exc
        if self.transport is not None:
            self.transport.abort()
        self.fail_all(exc)
        self.on_lost(self)


class RespClient:
    """One multiplexed connection, bound to the event loop that first uses it."""

    def __init__(self, url: str, connect_timeout: float = 2.0, command_timeout: float = 5.0) -> None:
        self.target = RedisTarget.parse(url)  # with sentinels: each connect asks them for the primary
        opts = parse_url(self.target.url)
        self.host = opts.get("host", "127.0.0.1")
        self.port = int(opts.get("port", 6379))
        self.path = opts.get("path") if opts.get("connection_class") is UnixDomainSocketConnection else None
        self.use_ssl = opts.get("connection_class") is SSLConnection
        self.db = int(opts.get("db", 0) or 0)
        self.username = opts.get("username")
        self.password = opts.get("password")
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self._proto: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._closed = False

    # ---- connection ---------------------------------------------------------------------------------
    def connection_gone(self, proto: _Protocol) -> None:
        """``proto``'s connection is closed, lost or aborted: the next call connects anew."""
        if self._proto is proto:
            self._proto = None

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        host, port = self.host, self.port
        try:
            if self.target.sentinels:
                host, port = await self.target.master_address(self.connect_timeout)
            if self.path:
                coro = loop.create_unix_connection(lambda: _Protocol(self.connection_gone), self.path)
            else:
                ssl_ctx = ssl_module.create_default_context() if self.use_ssl else None
                coro = loop.create_connection(
                    lambda: _Protocol(self.connection_gone), host, port, ssl=ssl_ctx,
                    server_hostname=host if ssl_ctx else None,
                )  # fmt: skip
            _, proto = await asyncio.wait_for(coro, self.connect_timeout)
        except TimeoutError as exc:
            raise RedisTimeoutError(f"timed out connecting to Redis after {self.connect_timeout} s") from exc
        except OSError as exc:
            raise RedisConnectionError(f"cannot connect to Redis: {exc}") from exc
        handshake = []
        if self.password:
            auth = ("AUTH", self.username, self.password) if self.username else ("AUTH", self.password)
            handshake.append(self._send(proto, auth))
        if self.db:
            handshake.append(self._send(proto, ("SELECT", self.db)))
        if handshake:
            try:
                await asyncio.wait_for(asyncio.gather(*handshake), self.command_timeout)
            except BaseException:
                if proto.transport is not None:
                    proto.transport.abort()
                raise
        self._proto = proto
        if self._watchdog is None:
            self._schedule_watchdog(loop)
        return proto

    def _schedule_watchdog(self, loop: asyncio.AbstractEventLoop) -> None:
        self._watchdog = loop.call_later(min(1.0, self.command_timeout / 2), self._check_timeouts, loop)

    def _check_timeouts(self, loop: asyncio.AbstractEventLoop) -> None:
        self._watchdog = None
        if self._closed:
            return
        proto = self._proto
        if proto is not None and proto.pending:
            _, sent_at = proto.pending[0]
            if time.monotonic() - sent_at > self.command_timeout:
                proto.abort(RedisTimeoutError(f"no reply from Redis within {self.command_timeout} s"))
        self._schedule_watchdog(loop)

    @staticmethod
    def _send(proto: _Protocol, args: tuple[Arg, ...]) -> asyncio.Future[Reply]:
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        proto.pending.append((fut, time.monotonic()))
        if not proto.out:
            fut.get_loop().call_soon(proto.flush)
        proto.out.append(hiredis.pack_command(args))  # type: ignore[arg-type]  # its stub says a 1-tuple
        return fut

    async def _connect_and_send(self, args: tuple[Arg, ...]) -> Reply:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())
        proto = await asyncio.shield(self._connecting)
        return await self._send(proto, args)

    def call(self, *args: Arg) -> asyncio.Future[Reply]:
        """Send a command now (if connected) and return an awaitable for its reply."""
        if self._closed:
            raise RedisConnectionError("client is closed")
        proto = self._proto
        if proto is not None:
            return self._send(proto, args)
        return asyncio.ensure_future(self._connect_and_send(args))

    async def aclose(self) -> None:
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        proto, self._proto = self._proto, None
        if proto is not None and proto.transport is not None:
            if proto.out:
                proto.flush()  # e.g. a background ZREM queued in this loop iteration
            proto.transport.close()


class Script:
    """EVALSHA with transparent NOSCRIPT handling (after a Redis restart or SCRIPT FLUSH)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    async def __call__(self, client: RespClient, keys: list[str], args: list[Arg]) -> Reply:
        try:
            return await client.call("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.call("SCRIPT", "LOAD", self.text)
            return await client.call("EVALSHA", self.sha, len(keys), *keys, *args)

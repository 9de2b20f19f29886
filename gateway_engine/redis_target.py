"""Where the shared Redis is: one address, or a primary that Redis Sentinel names (issue "Several
hosts": the gateway follows a failover).

    REDIS_URL=redis://10.0.0.5:6379/0                                   # one server (or a managed endpoint)
    REDIS_URL=redis://:secret@mymaster/0?sentinels=10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379

With ``sentinels``, the URL's host is the name the Sentinels monitor (``sentinel monitor mymaster …``),
it has no port, and every new connection asks the Sentinels, in turn, for that master's current address
(``SENTINEL get-master-addr-by-name``). A failover moves the primary; the clients see it as a dropped
connection or a ``READONLY`` answer from the demoted server (gateway_engine/redis_errors.py), reconnect,
and reach the new primary. The same URL serves every client of the gateway: the engine's RESP client
(quota store, breaker), the Django side's redis-py clients (``sync_client``), and Celery's broker
(``celery_broker`` gives kombu's ``sentinel://`` form).

A value-type module beside the clients: it imports hiredis and redis-py, nothing of the project.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import hiredis

SENTINEL_PARAM = "sentinels"
DEFAULT_SENTINEL_PORT = 26379


class MasterUnknown(ConnectionError):
    """No Sentinel answered with an address for the master (all unreachable, or none knows the name)."""


@dataclass(frozen=True)
class RedisTarget:
    """A Redis URL split into the address part and the Sentinel part."""

    url: str  # the URL without the sentinels parameter (what redis-py parses)
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""  # the Sentinel master name (the URL's host) when sentinels are given

    @classmethod
    def parse(cls, url: str) -> RedisTarget:
        """ValueError naming REDIS_URL's part that is wrong."""
        parts = urlsplit(url)
        query = parse_qs(parts.query, keep_blank_values=True)
        raw = query.pop(SENTINEL_PARAM, None)
        plain = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
        if raw is None:
            return cls(plain)
        sentinels = parse_sentinels(",".join(raw))
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(f"REDIS_URL: sentinels need a redis:// or rediss:// URL, not {parts.scheme}://")
        if not parts.hostname:
            raise ValueError(
                "REDIS_URL: with sentinels the URL's host is the master's name (redis://mymaster/0)"
            )
        if parts.port is not None:
            raise ValueError(
                f"REDIS_URL: with sentinels the host {parts.hostname!r} is the master's name and has no port "
                f"(the Sentinels give the address); drop ':{parts.port}'"
            )
        return cls(plain, sentinels, parts.hostname)

    @property
    def db(self) -> int:
        path = urlsplit(self.url).path.strip("/")
        return int(path) if path.isdigit() else 0

    async def master_address(self, timeout: float) -> tuple[str, int]:
        """The current primary's (host, port), asked of each Sentinel in turn; MasterUnknown if none
        answers with one."""
        problems = []
        for host, port in self.sentinels:
            try:
                reply = await asyncio.wait_for(_ask(host, port, self.master), timeout)
            except (OSError, TimeoutError, hiredis.ProtocolError) as exc:
                problems.append(f"{host}:{port}: {exc.__class__.__name__} {exc}")
                continue
            if isinstance(reply, list) and len(reply) == 2:
                return reply[0].decode(), int(reply[1])
            problems.append(f"{host}:{port}: does not know master {self.master!r}")
        raise MasterUnknown(f"no Sentinel gave the address of master {self.master!r} ({'; '.join(problems)})")


def parse_sentinels(text: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, str(DEFAULT_SENTINEL_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"REDIS_URL: sentinels: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("REDIS_URL: sentinels is empty (give host:port,host:port)")
    return tuple(out)


async def _ask(host: str, port: int, master: str) -> Any:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(hiredis.pack_command(("SENTINEL", "get-master-addr-by-name", master)))  # type: ignore[arg-type]
        await writer.drain()
        parser = hiredis.Reader()
        while True:
            data = await reader.read(4096)
            if not data:
                raise ConnectionError("the Sentinel closed the connection")
            parser.feed(data)
            reply = parser.gets()
            if reply is not False:
                return reply
    finally:
        writer.close()


def sync_client(url: str, **kwargs: Any):  # type: ignore[no-untyped-def]  # redis.Redis
    """A redis-py client for ``url``: ``redis.Redis.from_url``, or with sentinels a client whose
    connections ask the Sentinels for the master (redis-py's ``Sentinel.master_for``)."""
    import redis
    from redis.sentinel import Sentinel

    target = RedisTarget.parse(url)
    if not target.sentinels:
        return redis.Redis.from_url(target.url, **kwargs)
    parts = urlsplit(target.url)
    timeout = kwargs.get("socket_timeout")
    # Any: redis-py's annotations differ between releases (untyped before 6, typed since)
    sentinel: Any = Sentinel(list(target.sentinels), socket_timeout=timeout or 2.0)
    return sentinel.master_for(
        target.master, db=target.db, username=parts.username or None, password=parts.password or None,
        ssl=parts.scheme == "rediss", **kwargs,
    )  # fmt: skip


def celery_broker(url: str) -> tuple[str, dict[str, Any]]:
    """Celery's broker URL and transport options for ``url``: itself (no options), or with sentinels
    kombu's ``sentinel://…;sentinel://…`` with ``master_name``."""
    target = RedisTarget.parse(url)
    if not target.sentinels:
        return url, {}
    parts = urlsplit(target.url)
    auth = f":{parts.password}@" if parts.password else ""
    broker = ";".join(f"sentinel://{auth}{host}:{port}/{target.db}" for host, port in target.sentinels)
    return broker, {"master_name": target.master}

"""Request-side security helpers (#29): the client's IP address, and the throttle on failed API-key checks.

Client IP (``client_ip``): ``REMOTE_ADDR``, unless that peer is one of ``GATEWAY_TRUSTED_PROXIES``
(addresses or CIDRs); only then is ``X-Forwarded-For`` read, from the right, and the first address that is
not a trusted proxy is the client (the left part of the header is whatever the client sent, so it is never
believed). The API throttle below and the admin login lockout (django-axes, ``AXES_CLIENT_IP_CALLABLE``)
both use it.

Failed API-key checks (``FailedAuthThrottle``): at most ``GATEWAY_AUTH_FAILURE_LIMIT`` failed checks per
client IP per ``GATEWAY_AUTH_FAILURE_WINDOW_SECONDS`` (fixed windows); past it the address answers 429
with ``Retry-After`` until its window ends, *before* the key is looked up — so a flood of bad keys costs one
counter read each, never a database query, and a valid key sent from that address waits too (the check
cannot tell it apart without the lookup). Successful requests are never counted. A request without an
``Authorization`` header is not a failed check (401 without any lookup).

Where the counter lives follows the project's rule for shared limits: with ``REDIS_URL`` it is a Redis
key per address and window shared by every web process; Redis unreachable → the caller answers 503 with
``Retry-After`` (``RateLimiterUnavailable``), never a per-process count or an unthrottled pass. Without
``REDIS_URL`` (single-process mode) it is the process's default cache.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from gateway_engine.errors import Unavailable
from gateway_engine.redis_errors import REDIS_ERRORS

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

REDIS_TIMEOUT_SECONDS = 1.0  # a hung Redis answers 503 in about a second, like the per-key throttle
clock = time.time  # the windows' clock (tests pin it)


# --- client IP ----------------------------------------------------------------------------------------


def parse_networks(entries: Iterable[str], name: str = "GATEWAY_TRUSTED_PROXIES") -> tuple[Network, ...]:
    """``["10.0.0.1", "10.0.0.0/8", "fd00::/8"]`` → networks; a bad entry refuses to start, by name."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {entry.strip()!r} is not an IP address or CIDR network (e.g. 10.0.0.1 or 10.0.0.0/8)"
            ) from None
    return tuple(networks)


def _address(text: str) -> Address | None:
    """An address as proxies write it (``1.2.3.4``, ``1.2.3.4:5678``, ``2001:db8::1``, ``[2001:db8::1]:5678``),
    IPv4-mapped IPv6 as IPv4; None when it is not one."""
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: Address, proxies: tuple[Network, ...]) -> bool:
    return any(address.version == net.version and address in net for net in proxies)


def client_ip(request) -> str | None:
    """The calling client's address (see the module docstring), or None when the request has none (no or
    an unparsable REMOTE_ADDR: a test request, a Unix socket), as django-axes expects."""
    meta = request.META
    remote = _address(meta.get("REMOTE_ADDR") or "")
    if remote is None:
        return None
    proxies: tuple[Network, ...] = settings.GATEWAY_TRUSTED_PROXIES
    if not proxies or not _trusted(remote, proxies):
        return str(remote)
    nearest = remote  # the closest hop known to be a real address
    for hop in reversed(meta.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        if not hop.strip():
            continue
        address = _address(hop)
        if address is None:
            break  # a trusted proxy wrote something that is not an address: stop at the last real one
        if not _trusted(address, proxies):
            return str(address)
        nearest = address
    return str(nearest)


# --- failed API-key checks --------------------------------------------------------------------------


class RateLimiterUnavailable(Unavailable):
    """The shared counter (Redis) cannot be reached: the request must fail (503), not pass unthrottled."""

    code = "rate_limiter_unavailable"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # seconds until the address's window ends (when not allowed)


@cache
def _redis(url: str):
    from gateway_site.redis import sync_redis

    # one pooled client per process and URL, built on first use (redis-py's pools are fork-safe)
    return sync_redis(url, timeout=REDIS_TIMEOUT_SECONDS, connect_timeout=REDIS_TIMEOUT_SECONDS)


class FailedAuthThrottle:
    """One client address's failed-check counter for the current window."""

    def __init__(self, ip: str | None, *, now: float | None = None):
        ip = ip or "unknown"  # requests without an address share one counter
        self.ip = ip
        self.limit: int = settings.GATEWAY_AUTH_FAILURE_LIMIT
        self.window: int = settings.GATEWAY_AUTH_FAILURE_WINDOW_SECONDS
        now = clock() if now is None else now
        index, elapsed = divmod(int(now), self.window)
        self.retry_after = max(1, self.window - elapsed)
        self.key = f"{settings.GATEWAY_REDIS_PREFIX}authfail:{self.window}:{index}:{ip}"

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def check(self) -> Verdict:
        """Before the key lookup: is this address still allowed to try? One counter read."""
        if not self.enabled:
            return Verdict(True, 0)
        count = self._read()
        return Verdict(count < self.limit, self.retry_after)

    def failed(self) -> None:
        """After a failed check: count it (one round trip with Redis)."""
        if not self.enabled:
            return
        self._increment()

    # -- storage ---------------------------------------------------------------------------------------

    def _read(self) -> int:
        if settings.REDIS_URL:
            value = self._redis_call(lambda client: client.get(self.key))
            return int(value or 0)
        from django.core.cache import caches

        return int(caches["default"].get(self.key, 0))

    def _increment(self) -> None:
        ttl = self.retry_after + 1
        if settings.REDIS_URL:

            def incr(client):
                pipe = client.pipeline(transaction=False)
                pipe.incr(self.key)
                pipe.expire(self.key, ttl)
                pipe.execute()

            self._redis_call(incr)
            return
        from django.core.cache import caches

        local = caches["default"]
        local.add(self.key, 0, ttl)
        try:
            local.incr(self.key)
        except ValueError:  # expired between add and incr
            local.set(self.key, 1, ttl)

    def _redis_call(self, fn):
        try:
            return fn(_redis(settings.REDIS_URL))
        except (*REDIS_ERRORS, OSError) as exc:
            raise RateLimiterUnavailable(f"failed-authentication counter unavailable (Redis): {exc}") from exc

"""``REDIS_ERRORS``: the one tuple of redis-py errors that mean "Redis cannot be reached".

Every place that rides through, wraps or answers a Redis outage catches this tuple (the quota store,
the breaker, the failed-authentication counter, the dispatcher's ride-through, the API's 503): a
refused or dropped connection, a timed-out command, and a server that cannot take the command right
now because of a failover (``FAILOVER_ERRORS``: ``READONLY`` — the address now reaches a replica, a
managed failover moved the primary —, ``LOADING`` — a restarted server still loading its data —,
``MASTERDOWN`` — a replica that lost its primary). After a failover error the client reconnects (a
managed endpoint's new connection reaches the new primary): the engine's RESP client drops the
connection (gateway_engine/quota/resp.py), redis-py clients retry on a fresh one (gateway_site/redis.py).
A place that talks to a raw socket adds ``OSError`` beside it. Other errors Redis itself answers (a
script error, a wrong type) are not in it: they are bugs, not outages.
"""

from __future__ import annotations

from redis.exceptions import BusyLoadingError, MasterDownError, ReadOnlyError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["FAILOVER_ERRORS", "REDIS_ERRORS", "failover_error"]

# error replies of a server that cannot serve writes now (a failover), as redis-py names them;
# BusyLoadingError is a ConnectionError already
FAILOVER_ERRORS: tuple[type[Exception], ...] = (ReadOnlyError, BusyLoadingError, MasterDownError)
_FAILOVER_PREFIXES = {"READONLY": ReadOnlyError, "LOADING": BusyLoadingError, "MASTERDOWN": MasterDownError}

REDIS_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, *FAILOVER_ERRORS)


def failover_error(message: str) -> Exception | None:
    """The failover error of an error reply (``READONLY You can't write against a read only replica.``),
    or None when the reply is another error."""
    cls = _FAILOVER_PREFIXES.get(message.split(" ", 1)[0])
    return cls(message) if cls is not None else None

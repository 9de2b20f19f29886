"""``REDIS_ERRORS``: the one tuple of redis-py errors that mean "Redis cannot be reached".

Every place that rides through, wraps or answers a Redis outage catches this tuple (the quota store,
the breaker, the failed-authentication counter, the dispatcher's ride-through, the API's 503): a
refused or dropped connection and a timed-out command. A place that talks to a raw socket adds
``OSError`` beside it. Errors Redis itself answers (a script error, a wrong type) are not in it: they
are bugs, not outages.
"""

from __future__ import annotations

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["REDIS_ERRORS"]

REDIS_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)

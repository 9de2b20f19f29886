"""The one place production code builds a synchronous Redis client (redis-py).

    with sync_redis() as client:          # settings.REDIS_URL, 2 s timeouts; closed on exit
        client.get(key)

The engine (gateway_engine) builds its own clients from the URL it is given; everything on the Django
side (providers, batches, observability, dashboard, openai_api) uses this. A failover answer (READONLY,
LOADING, MASTERDOWN: gateway_engine.redis_errors.FAILOVER_ERRORS) is retried on a new connection like a
dropped one (a managed endpoint's new connection reaches the new primary); when the retries are spent
it reaches the caller as one of REDIS_ERRORS, which every caller rides through or answers 503 for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from gateway_engine.redis_errors import FAILOVER_ERRORS
from gateway_engine.redis_target import sync_client

if TYPE_CHECKING:
    import redis

DEFAULT_TIMEOUT_SECONDS = 2.0


def sync_redis(
    url: str | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
    connect_timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> redis.Redis:
    """A new client for ``url`` (default settings.REDIS_URL). ``timeout`` bounds each command (None:
    wait forever, for a pub/sub listener); ``connect_timeout`` bounds connecting. No REDIS_URL: an
    error, never a silent local fallback."""
    url = url or settings.REDIS_URL
    if not url:
        raise ImproperlyConfigured("REDIS_URL is not set: this needs the shared Redis")
    return sync_client(  # REDIS_URL with ?sentinels=: a client that asks the Sentinels for the primary
        url,
        socket_timeout=timeout,
        socket_connect_timeout=connect_timeout,
        retry_on_error=list(FAILOVER_ERRORS),  # beside the default retries: reconnect, then try again
    )

"""Keys for the interactive lane — ``Authorization: Bearer <key>``, or ``x-api-key: <key>`` (what
Anthropic's API and SDKs use) when there is no Authorization header: the REST API's own check (batches.api.auth: digest lookup,
revoked keys refused, failed attempts throttled per address), run in a thread on a miss, and its
answer remembered for KEY_CACHE_SECONDS per key digest, so a busy key costs no query per call.

A key revoked or a team deleted is refused within KEY_CACHE_SECONDS by every web process."""

from __future__ import annotations

import asyncio
import hashlib
import time

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections
from django.http import HttpRequest
from rest_framework import exceptions

from batches.api.auth import ApiClient, ApiKeyAuthentication
from batches.api.exceptions import DependencyUnavailable

from .errors import CallError

KEY_CACHE_SECONDS = 5.0
MAX_CACHED_KEYS = 10_000

_cache: dict[bytes, tuple[float, ApiClient]] = {}
_checking: dict[bytes, asyncio.Future[ApiClient]] = {}  # digest -> the check under way (single flight)


def key_header(request: HttpRequest) -> str:
    """The caller's credentials as an Authorization header value (``x-api-key`` as a Bearer key)."""
    header = request.headers.get("Authorization")
    if header is None and (api_key := request.headers.get("x-api-key")) is not None:
        return f"Bearer {api_key}"
    return header or ""


def _check(request: HttpRequest) -> ApiClient:
    request.META["HTTP_AUTHORIZATION"] = key_header(request)  # the REST check reads the header
    try:
        found = ApiKeyAuthentication().authenticate(request)  # type: ignore[arg-type]
    finally:
        close_old_connections()
    assert found is not None  # authenticate raises when there is no key
    return found[0]


async def authenticate(request: HttpRequest) -> ApiClient:
    """The calling key's team, or a CallError (401 invalid_api_key, 429 too many failed attempts from
    this address, 503 when Redis cannot count failures)."""
    header = key_header(request)
    digest = hashlib.sha256(header.encode("utf-8", "surrogatepass")).digest()
    now = time.monotonic()
    held = _cache.get(digest)
    if held is not None and held[0] > now:
        return held[1]
    pending = _checking.get(digest)
    if pending is not None:  # another call of this key is checking it now: one check, not one per caller
        return await asyncio.shield(pending)
    pending = _checking[digest] = asyncio.ensure_future(_checked(request, digest, now))
    pending.add_done_callback(
        lambda done: _checking.pop(digest, None) if _checking.get(digest) is done else None
    )
    return await asyncio.shield(pending)


async def _checked(request: HttpRequest, digest: bytes, now: float) -> ApiClient:
    try:
        client = await sync_to_async(_check, thread_sensitive=False)(request)
    except exceptions.Throttled as exc:
        wait = str(int(exc.wait or 1))
        raise CallError(
            429, str(exc.detail), "rate_limit_error", None, "rate_limit_exceeded", {"Retry-After": wait}
        ) from None
    except (exceptions.NotAuthenticated, exceptions.AuthenticationFailed) as exc:
        raise CallError(401, str(exc.detail), "invalid_request_error", None, "invalid_api_key",
                        {"WWW-Authenticate": "Bearer"}) from None  # fmt: skip
    except DependencyUnavailable as exc:
        raise CallError(
            503, exc.message, "server_error", None, "dependency_unavailable", {"Retry-After": "5"}
        ) from None
    except DatabaseError:
        raise CallError(503, "the database is unavailable; retry later", "server_error", None,
                        "dependency_unavailable", {"Retry-After": "5"}) from None  # fmt: skip
    if len(_cache) >= MAX_CACHED_KEYS:
        _cache.clear()
    _cache[digest] = (now + KEY_CACHE_SECONDS, client)
    return client

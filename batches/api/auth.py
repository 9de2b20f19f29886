"""`Authorization: Bearer <api key>` authentication for the REST API.

A key is looked up by its SHA-256 digest (unique index), then the digest and the visible prefix are
compared in constant time. Revoked keys are refused. `last_used_at` is written at most once per
LAST_USED_RESOLUTION so that a busy key does not turn every request into a write.

Failed checks are throttled per client IP (gateway_site.security.FailedAuthThrottle, #29): a request that
presents credentials is first checked against its address's failure counter (one Redis read), and an
address past GATEWAY_AUTH_FAILURE_LIMIT answers 429 with Retry-After before any key is looked up; every
refused credential (wrong scheme, malformed, unknown or revoked key) counts one failure. Redis
unreachable → 503 with Retry-After, as for the per-key throttle.
"""

from __future__ import annotations

import datetime as dt
import hmac
from dataclasses import dataclass

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from gateway_site.security import FailedAuthThrottle, RateLimiterUnavailable, client_ip
from teams.caller import set_api_caller
from teams.keys import KEY_PREFIX, hash_key, visible_prefix
from teams.models import ApiKey, Team

from .exceptions import DependencyUnavailable

LAST_USED_RESOLUTION = dt.timedelta(minutes=1)
MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class ApiClient:
    """What `request.user` is for API requests: the calling key's team."""

    team: Team
    api_key: ApiKey

    is_authenticated = True
    is_anonymous = False

    @property
    def pk(self) -> int:
        return self.api_key.pk

    def __str__(self) -> str:
        return f"{self.team.name}:{self.api_key.prefix}"


class TooManyFailedAttempts(exceptions.Throttled):
    """429 + Retry-After for an address past its failed-check limit; /v1/ renders it as rate_limit_error."""

    default_detail = "too many failed API key attempts from this address"

    def __init__(self, wait: int):
        super().__init__(wait=wait)


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header:
            raise exceptions.NotAuthenticated("missing 'Authorization: Bearer <api key>' header")
        throttle = FailedAuthThrottle(client_ip(request))
        verdict = self._guarded(throttle.check)
        if not verdict.allowed:
            raise TooManyFailedAttempts(verdict.retry_after)
        try:
            return self.authenticate_credentials(header)
        except exceptions.AuthenticationFailed:
            self._guarded(throttle.failed)
            raise

    @staticmethod
    def _guarded(fn):
        try:
            return fn()
        except RateLimiterUnavailable as exc:
            raise DependencyUnavailable("redis", "rate limiter unavailable (Redis); retry later") from exc

    def authenticate_credentials(self, header: list[bytes]) -> tuple[ApiClient, ApiKey]:
        if header[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed("the Authorization header must use the Bearer scheme")
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "malformed Authorization header: expected 'Bearer <api key>'"
            )
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("invalid API key") from None
        return self.authenticate_key(raw)

    def authenticate_key(self, raw: str) -> tuple[ApiClient, ApiKey]:
        if not raw.startswith(KEY_PREFIX) or len(raw) > MAX_KEY_LENGTH:
            raise exceptions.AuthenticationFailed("invalid API key")
        digest = hash_key(raw)
        key = ApiKey.objects.select_related("team").filter(key_hash=digest).first()
        # Constant-time comparisons: the index lookup already matched, this guards against any
        # collation or truncation surprises in the database and keeps timing uniform.
        if (
            key is None
            or not hmac.compare_digest(key.key_hash.encode(), digest.encode())
            or not hmac.compare_digest(key.prefix.encode(), visible_prefix(raw).encode())
        ):
            raise exceptions.AuthenticationFailed("invalid API key")
        if key.revoked_at is not None:
            raise exceptions.AuthenticationFailed("this API key has been revoked")
        self._touch(key)
        set_api_caller(key)  # the config history names this key for actions of the request
        return ApiClient(team=key.team, api_key=key), key

    @staticmethod
    def _touch(key: ApiKey) -> None:
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
            key.last_used_at = now

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) with a WWW-Authenticate challenge.
        return f'{self.keyword} realm="api"'

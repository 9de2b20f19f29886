"""Retry policy: what is retried, how long to wait, and how to read Retry-After.

Retried: 429, 5xx, timeouts, connection errors and unreadable answers. Never retried: any other 4xx
(400/401/403/404/422 …) — the provider's status and message are recorded instead.
Waits: a 429's Retry-After (seconds or an HTTP date) when given, otherwise exponential backoff with
full jitter: uniform(0, min(cap, base × 2^n)) for the n-th retry (n = 0 for the first retry).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

# errors_by_class keys used in stats
CLASS_4XX = "4xx"
CLASS_5XX = "5xx"
CLASS_429 = "429"
CLASS_TIMEOUT = "timeout"
CLASS_CONNECTION = "connection"
CLASS_INVALID = "invalid_response"

MAX_RETRY_AFTER_SECONDS = 600.0


class ErrorType:
    """Same values as batches.models.ErrorType (kept Django-free so the engine runs in plain Python)."""

    CLIENT_ERROR = "client_error"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    QUOTA_IMPOSSIBLE = "quota_impossible"
    NO_PROVIDER = "no_provider"
    INVALID_RESPONSE = "invalid_response"
    GATEWAY_ERROR = "gateway_error"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    BUDGET_EXCEEDED = "budget_exceeded"


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float = 0.5
    cap_seconds: float = 30.0

    def backoff(self, retry_index: int, rng: random.Random | None = None) -> float:
        """Full-jitter delay before the retry number ``retry_index`` (0-based) to the same provider."""
        ceiling = min(self.cap_seconds, self.base_seconds * (2 ** max(0, retry_index)))
        return (rng or random).uniform(0.0, ceiling)

    def ceiling(self, retry_index: int) -> float:
        return min(self.cap_seconds, self.base_seconds * (2 ** max(0, retry_index)))


def error_type_for_status(status_code: int) -> str:
    if status_code == 429:
        return ErrorType.RATE_LIMITED
    if status_code >= 500:
        return ErrorType.SERVER_ERROR
    return ErrorType.CLIENT_ERROR


def is_retryable_status(status_code: int) -> bool:
    return status_code == 429 or status_code >= 500


def is_retryable_error(error_type: str, status_code: int | None = None) -> bool:
    if error_type in (ErrorType.TIMEOUT, ErrorType.CONNECTION_ERROR, ErrorType.INVALID_RESPONSE):
        return True
    if status_code is not None:
        return is_retryable_status(status_code)
    return error_type in (ErrorType.RATE_LIMITED, ErrorType.SERVER_ERROR)


def error_class(error_type: str, status_code: int | None) -> str:
    """The stats bucket of a failed attempt: 4xx, 5xx, 429, timeout, connection, invalid_response."""
    if status_code == 429:
        return CLASS_429
    if error_type == ErrorType.TIMEOUT:
        return CLASS_TIMEOUT
    if error_type == ErrorType.CONNECTION_ERROR:
        return CLASS_CONNECTION
    if error_type == ErrorType.INVALID_RESPONSE and not (status_code and status_code >= 400):
        return CLASS_INVALID
    if status_code is not None and status_code >= 500:
        return CLASS_5XX
    return CLASS_4XX


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date); None if absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(MAX_RETRY_AFTER_SECONDS, max(0.0, seconds))


def parse_reset_duration(value: str | None) -> float | None:
    """x-ratelimit-reset-* style durations: '1s', '250ms', '6m0s', '1h2m3.5s' or plain seconds."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    total, number = 0.0, ""
    i = 0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    while i < len(value):
        ch = value[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if value.startswith("ms", i) else ch
        if unit not in units or not number:
            return None
        try:
            total += float(number) * units[unit]
        except ValueError:
            return None
        number = ""
        i += len(unit)
    if number:
        return None
    return min(MAX_RETRY_AFTER_SECONDS, total)


def rate_limit_wait(headers) -> float | None:
    """How long a 429 asks us to wait: Retry-After first, then x-ratelimit-reset-requests/-tokens."""
    wait = parse_retry_after(headers.get("retry-after"))
    if wait is not None:
        return wait
    resets = [
        parse_reset_duration(headers.get(h))
        for h in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
    ]
    resets = [r for r in resets if r is not None]
    return max(resets) if resets else None

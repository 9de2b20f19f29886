"""Retry policy: how long to wait before a retry, how to read rate-limit header values, and the error
classifier. What each error type means — retried or not, its class, its backoff policy — is its row of
gateway_engine/error_kinds.py; this module reads the rows.

Retried: the rows with ``retryable`` (``rate_limited``, ``server_error``, ``timeout``,
``connection_error``, ``invalid_response``, ``overloaded``). Never retried: ``client_error`` (any
other 4xx: 400/401/403/404/422 …) and the gateway's own ends. Which type an error answer gets is the
provider's wire format's decision (gateway_engine.wire, e.g. ``wire.openai``). Waits: a 429's
Retry-After / ``x-ratelimit-reset-*`` when given and believable, otherwise exponential backoff with
full jitter: uniform(0, min(cap, base × 2^n)) for the n-th retry (n = 0 for the first), base and cap
scaled by the row's backoff policy (gateway_engine/backoff.py ``BACKOFF_POLICIES``: an ``overloaded``
answer waits longer than a ``server_error``). The wire format hands over a response's rate-limit
headers under the names read here (``rate_limit_wait``: ``retry-after`` and ``x-ratelimit-reset*``).

Rate-limit headers are believed only up to a ceiling (``RetryPolicy.max_rate_limit_wait_seconds``,
default ``DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS``; the gateway sets it from its settings): a longer wait
is treated as malformed — logged and ignored, so the item falls back to its own backoff — instead of
pausing a provider for years.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from .backoff import BACKOFF_POLICIES, STANDARD, full_jitter
from .error_kinds import CLASS_OTHER, ERROR_CLASSES, ERROR_KINDS, RETRYABLE
from .error_kinds import ErrorType as ErrorType  # re-exported: where the engine has always read it

log = logging.getLogger(__name__)

DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS = 600.0
# A plain number at least this large in an x-ratelimit-reset* header is a Unix time, not a duration.
EPOCH_THRESHOLD = 1_000_000_000.0


# ---- the error-class table -------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorClassRule:
    """An outcome is in ``key`` when its error_type is one of ``types`` OR its status code lies in
    [status_from, status_to). Rules are tried in table order; the first match wins."""

    key: str
    label: str
    types: frozenset[str] = frozenset()
    status_from: int | None = None
    status_to: int | None = None

    @property
    def status_range(self) -> tuple[int, int] | None:
        """[from, to) of the status codes in this class (a lone status_from: that code only), or None.
        The dashboard's SQL uses the same range."""
        if self.status_from is None:
            return None
        return self.status_from, self.status_to or self.status_from + 1

    def matches(self, error_type: str, status_code: int | None) -> bool:
        if error_type in self.types:
            return True
        bounds = self.status_range
        return bounds is not None and status_code is not None and bounds[0] <= status_code < bounds[1]


# The classifier the engine's stats, the dashboard's SQL (dashboard.selectors builds its CASE/Q
# expressions from this tuple) and any Python caller use: the classes of gateway_engine/error_kinds.py
# in their order, each with the error types whose row names it.
ERROR_CLASS_TABLE: tuple[ErrorClassRule, ...] = tuple(
    ErrorClassRule(
        klass.key,
        klass.label,
        frozenset(name for name, row in ERROR_KINDS.items() if row.error_class == klass.key),
        klass.status_from,
        klass.status_to,
    )
    for klass in ERROR_CLASSES
)
ERROR_CLASS_KEYS: tuple[str, ...] = tuple(rule.key for rule in ERROR_CLASS_TABLE) + (CLASS_OTHER,)


def error_class(error_type: str, status_code: int | None) -> str:
    """The class of a failed attempt or item (first matching row of ERROR_CLASS_TABLE, else 'other')."""
    for rule in ERROR_CLASS_TABLE:
        if rule.matches(error_type or "", status_code):
            return rule.key
    return CLASS_OTHER


# ---- retry decisions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float = 0.5
    cap_seconds: float = 30.0
    max_rate_limit_wait_seconds: float = DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS

    def backoff(self, retry_index: int, rng: random.Random | None = None, *, policy: str = STANDARD) -> float:
        """Full-jitter delay before the retry number ``retry_index`` (0-based) to the same provider,
        under the error type's ``policy`` (its row's ``backoff``: gateway_engine/backoff.py)."""
        return full_jitter(self.ceiling(retry_index, policy), rng)

    def ceiling(self, retry_index: int, policy: str = STANDARD) -> float:
        """The largest backoff before retry ``retry_index`` under ``policy`` (scaling base and cap)."""
        return BACKOFF_POLICIES[policy].ceiling(self.base_seconds, self.cap_seconds, retry_index)


# Retried: the transient types — the ``retryable`` column of the error-kind table
# (gateway_engine/error_kinds.py). Which type an error answer has (its status and body read by the
# provider's wire format, gateway_engine.wire) is the wire format's decision; this is the engine's.
RETRYABLE_ERROR_TYPES = RETRYABLE


def is_retryable_error(error_type: str) -> bool:
    """Whether an attempt that ended with ``error_type`` is tried again (the wire format already chose
    the type from the status: gateway_engine.wire)."""
    return error_type in RETRYABLE_ERROR_TYPES


# ---- rate-limit headers ----------------------------------------------------------------------------

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|h|m|s))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds_from_number(number: float, now: float | None, *, epoch_allowed: bool) -> float:
    if epoch_allowed and number >= EPOCH_THRESHOLD:
        return number - (time.time() if now is None else now)
    return number


def header_seconds(
    value: str | None, *, now: float | None = None, epoch_allowed: bool = False
) -> float | None:
    """Seconds to wait from a rate-limit header value, in any format providers use: plain seconds
    ('2', '1.5'), durations ('6m0s', '1m30.5s', '250ms', '1h2m'), an HTTP date, an RFC 3339 / ISO 8601
    time with a zone ('2026-12-01T15:32:28Z', Anthropic's resets), or (``epoch_allowed``) a Unix time. Past times give 0. None if absent or unreadable. No ceiling here (``capped_wait``)."""
    if value is None:
        return None
    value = str(value).strip()
    if not value or len(value) > 64:
        return None
    try:
        seconds: float | None = _seconds_from_number(float(value), now, epoch_allowed=epoch_allowed)
    except ValueError:
        if _DURATION.match(value):
            seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(value))
        else:
            when = _timestamp(value)
            seconds = None if when is None else when - (time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


# RFC 3339 / ISO 8601 date-times with a zone (Anthropic's anthropic-ratelimit-*-reset:
# "2026-12-01T15:32:28Z", fractions and "+01:00" offsets too); a time without a zone is unreadable.
_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _timestamp(value: str) -> float | None:
    """Unix seconds of an RFC 3339 / ISO 8601 time or an HTTP date that names its zone, else None."""
    try:
        if _ISO_DATETIME.match(value):
            when = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1:] in "Zz" else value)
        else:
            when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return when.timestamp()


def capped_wait(seconds: float | None, ceiling: float, *, source: str = "") -> float | None:
    """``seconds`` if believable (≤ ceiling); a longer wait is treated as malformed: logged, None."""
    if seconds is None:
        return None
    if seconds > ceiling:
        log.warning(
            "ignoring rate-limit header %s: asks for %.0f s, more than the %.0f s ceiling",
            source or "value",
            seconds,
            ceiling,
        )
        return None
    return seconds


def parse_retry_after(
    value: str | None, now: float | None = None, *, ceiling: float = DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS
) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None if absent, invalid or
    beyond ``ceiling``."""
    return capped_wait(header_seconds(value, now=now), ceiling, source="retry-after")


def parse_reset_duration(
    value: str | None, now: float | None = None, *, ceiling: float = DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS
) -> float | None:
    """x-ratelimit-reset-* values: '1s', '250ms', '6m0s', '1h2m3.5s', plain seconds, an HTTP date, an
    RFC 3339 time or a Unix time; None if absent, invalid or beyond ``ceiling``."""
    return capped_wait(
        header_seconds(value, now=now, epoch_allowed=True), ceiling, source="x-ratelimit-reset"
    )


RESET_HEADERS = ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens", "x-ratelimit-reset")


def rate_limit_wait(
    headers: Mapping[str, str],
    *,
    ceiling: float = DEFAULT_MAX_RATE_LIMIT_WAIT_SECONDS,
    now: float | None = None,
) -> float | None:
    """How long an answer asks us to wait: Retry-After first, then the longest believable
    x-ratelimit-reset-*; None when nothing believable was given (the caller's backoff applies).
    ``headers`` are an outcome's kept headers (``WireFormat.rate_limit_headers``, gateway_engine.wire)."""
    wait = parse_retry_after(headers.get("retry-after"), now, ceiling=ceiling)
    if wait is not None:
        return wait
    parsed = [parse_reset_duration(headers.get(h), now, ceiling=ceiling) for h in RESET_HEADERS]
    resets = [r for r in parsed if r is not None]
    return max(resets) if resets else None

"""An answer's remaining-quota headers → the quota engine's ``RemainingQuota`` (shared keys,
docs/quota.md "Shared keys").

Reads the kept headers every wire format hands over under the engine's names
(``WireFormat.rate_limit_headers``): ``x-ratelimit-remaining-requests`` / ``-tokens`` and
``x-ratelimit-reset-requests`` / ``-tokens`` (OpenAI's durations like ``6m0s``, Anthropic's RFC 3339
times, plain seconds). A missing reset (Azure sends only ``remaining``) counts as 60 s. Anthropic rounds
its token counts to the nearest thousand: its token ``remaining`` is taken 500 lower, the least it can be.

Bad headers change nothing: a remaining that is not a whole number, negative, or above the configured
per-minute limit, a reset that cannot be read or lies beyond the wait ceiling
(``RetryPolicy.max_rate_limit_wait_seconds``) drops that dimension, logged at most once per provider
per minute.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping

from .quota.adaptive import Remaining, RemainingQuota
from .quota.types import ProviderLimits
from .retry import header_seconds

log = logging.getLogger(__name__)

MISSING_RESET_SECONDS = 60.0
ANTHROPIC_ROUNDING = 500  # tokens: "rounded to the nearest thousand"
BAD_HEADER_LOG_SECONDS = 60.0
_COUNT = re.compile(r"^\d{1,15}$")
_logged: dict[str, float] = {}  # provider -> monotonic time of its last bad-header log


def remaining_quota(
    headers: Mapping[str, str], kind: str, limits: ProviderLimits, *, ceiling: float
) -> RemainingQuota:
    """The believable dimensions of one answer's remaining-quota headers (empty if none)."""
    problems: list[str] = []
    requests = _dimension(headers, "requests", limits.rpm, ceiling, problems)
    tokens = _dimension(headers, "tokens", limits.tpm, ceiling, problems)
    if tokens is not None and kind == "anthropic":
        tokens = Remaining(max(0.0, tokens.remaining - ANTHROPIC_ROUNDING), tokens.reset_seconds)
    if problems:
        log_bad_headers(limits.name, problems)
    return RemainingQuota(requests, tokens)


def _dimension(
    headers: Mapping[str, str], name: str, per_minute: int, ceiling: float, problems: list[str]
) -> Remaining | None:
    raw = headers.get(f"x-ratelimit-remaining-{name}")
    if raw is None:
        return None
    value = str(raw).strip()
    if not _COUNT.match(value):
        problems.append(f"x-ratelimit-remaining-{name}={value[:40]!r} is not a count")
        return None
    remaining = int(value)
    if remaining > per_minute:
        problems.append(f"x-ratelimit-remaining-{name}={remaining} is above the configured {per_minute}/min")
        return None
    reset_raw = headers.get(f"x-ratelimit-reset-{name}")
    if reset_raw is None:
        return Remaining(float(remaining), MISSING_RESET_SECONDS)
    reset = header_seconds(reset_raw, epoch_allowed=True)
    if reset is None or reset > ceiling:
        problems.append(
            f"x-ratelimit-reset-{name}={str(reset_raw)[:40]!r} is unreadable or beyond {ceiling:g} s"
        )
        return None
    return Remaining(float(remaining), reset)


def log_bad_headers(provider: str, problems: list[str]) -> None:
    """Log ignored remaining-quota headers, at most once per provider per BAD_HEADER_LOG_SECONDS."""
    now = time.monotonic()
    last = _logged.get(provider)
    if last is not None and now - last < BAD_HEADER_LOG_SECONDS:
        return
    _logged[provider] = now
    log.warning(
        "provider %s: ignoring remaining-quota headers (%s); the buckets stay as they are",
        provider,
        "; ".join(problems),
        extra={"event": "remaining_headers_ignored", "provider": provider},
    )

"""An answer's remaining-quota headers → the quota engine's ``RemainingQuota`` (shared keys,
docs/quota.md "Shared keys").

Reads the kept headers every wire format hands over under the engine's names
(``WireFormat.rate_limit_headers``): ``x-ratelimit-remaining-requests`` / ``-tokens`` and
``x-ratelimit-reset-requests`` / ``-tokens`` — for what each kind's headers *mean* (``HEADER_SEMANTICS``,
one entry per kind and dimension):

* ``until_reset`` (OpenAI, Anthropic): ``remaining`` is left until the reset the answer gives (OpenAI's
  durations like ``6m0s``, Anthropic's RFC 3339 times, plain seconds); followed.
* ``per_minute`` (Azure tokens): ``remaining`` is what is left of the per-minute token limit, and no reset
  is sent: read as left over the next 60 s; followed.
* ``short_window`` (Azure requests): the count left in Azure's current short window (Azure evaluates RPM
  over 1 or 10 s windows and says neither which nor when it ends; a 300 RPM deployment reports 50 at rest).
  Not a per-minute figure, and at the full rate a window count sits near 0 whoever sent the requests, so
  it cannot tell outside use from the gateway's own: **not followed** (the RPM bucket keeps the configured
  rate; a 429's ``retry-after-ms`` still holds the provider back).
* ``none`` (Gemini): no such headers.

A kind missing from the table is never followed: its headers are ignored, logged at most once per
provider per minute (``remaining_headers_unknown_kind``), and ``adaptive_status`` says so to the
providers page. Anthropic rounds its token counts to the nearest thousand: its token ``remaining`` is
taken 500 lower, the least it can be.

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

from .kinds import FOLLOWED, KINDS, NONE, PER_MINUTE, SHORT_WINDOW, KindHeaders
from .quota.adaptive import Remaining, RemainingQuota
from .quota.types import ProviderLimits
from .retry import header_seconds

log = logging.getLogger(__name__)

PER_MINUTE_SECONDS = 60.0  # a per-minute remaining with no reset: left over the next minute
BAD_HEADER_LOG_SECONDS = 60.0
_COUNT = re.compile(r"^\d{1,15}$")
_logged: dict[str, float] = {}  # provider -> monotonic time of its last bad-header log

# The one table of header meanings (docs/quota.md "Shared keys", docs/providers.md per kind): each kind's
# descriptor in gateway_engine/kinds.py
HEADER_SEMANTICS: dict[str, KindHeaders] = {k: d.headers for k, d in KINDS.items()}


def remaining_quota(
    headers: Mapping[str, str], kind: str, limits: ProviderLimits, *, ceiling: float
) -> RemainingQuota:
    """The believable, followed dimensions of one answer's remaining-quota headers (empty if none)."""
    meaning = HEADER_SEMANTICS.get(kind)
    if meaning is None:
        log_unknown_kind(limits.name, kind)
        return RemainingQuota()
    problems: list[str] = []
    requests = _dimension(headers, "requests", meaning.requests, limits.rpm, ceiling, problems)
    tokens = _dimension(headers, "tokens", meaning.tokens, limits.tpm, ceiling, problems)
    if tokens is not None and meaning.token_rounding:  # the provider rounds: the least it can be
        tokens = Remaining(max(0.0, tokens.remaining - meaning.token_rounding), tokens.reset_seconds)
    if problems:
        log_bad_headers(limits.name, problems)
    return RemainingQuota(requests, tokens)


def _dimension(
    headers: Mapping[str, str], name: str, meaning: str, per_minute: int, ceiling: float,
    problems: list[str],
) -> Remaining | None:  # fmt: skip
    raw = headers.get(f"x-ratelimit-remaining-{name}")
    if raw is None or meaning not in FOLLOWED:
        return None
    value = str(raw).strip()
    if not _COUNT.match(value):
        problems.append(f"x-ratelimit-remaining-{name}={value[:40]!r} is not a count")
        return None
    remaining = int(value)
    if remaining > per_minute:
        problems.append(f"x-ratelimit-remaining-{name}={remaining} is above the configured {per_minute}/min")
        return None
    if meaning == PER_MINUTE:
        return Remaining(float(remaining), PER_MINUTE_SECONDS)
    reset_raw = headers.get(f"x-ratelimit-reset-{name}")
    if reset_raw is None:
        problems.append(f"x-ratelimit-remaining-{name} came without x-ratelimit-reset-{name}")
        return None
    reset = header_seconds(reset_raw, epoch_allowed=True)
    if reset is None or reset > ceiling:
        problems.append(
            f"x-ratelimit-reset-{name}={str(reset_raw)[:40]!r} is unreadable or beyond {ceiling:g} s"
        )
        return None
    return Remaining(float(remaining), reset)


def _recently_logged(provider: str) -> bool:
    """True if ``provider`` was logged within BAD_HEADER_LOG_SECONDS; else notes now and says False."""
    now = time.monotonic()
    last = _logged.get(provider)
    if last is not None and now - last < BAD_HEADER_LOG_SECONDS:
        return True
    _logged[provider] = now
    return False


def log_bad_headers(provider: str, problems: list[str]) -> None:
    """Log ignored remaining-quota headers, at most once per provider per BAD_HEADER_LOG_SECONDS."""
    if _recently_logged(provider):
        return
    log.warning(
        "provider %s: ignoring remaining-quota headers (%s); the buckets stay as they are",
        provider,
        "; ".join(problems),
        extra={"event": "remaining_headers_ignored", "provider": provider},
    )


def log_unknown_kind(provider: str, kind: str) -> None:
    """A kind whose header meanings the gateway does not know: never followed, said at most once per
    provider per BAD_HEADER_LOG_SECONDS."""
    if _recently_logged(provider):
        return
    log.warning(
        "provider %s: kind %r has no known remaining-quota header meaning; adaptive stays off for it",
        provider,
        kind,
        extra={"event": "remaining_headers_unknown_kind", "provider": provider, "kind": kind},
    )


def adaptive_status(kind: str, adaptive: bool) -> str:
    """One line for operators: which of a provider's headers the buckets follow, and why not the rest."""
    if not adaptive:
        return "off (configured)"
    meaning = HEADER_SEMANTICS.get(kind)
    if meaning is None:
        return f"off: the meaning of kind {kind}'s remaining-quota headers is not known"
    followed = [d for d, m in (("requests", meaning.requests), ("tokens", meaning.tokens)) if m in FOLLOWED]
    if not followed:
        return "off: the provider sends no remaining-quota headers"
    notes = {SHORT_WINDOW: "a 1–10 s window count, not followed", NONE: "not sent"}
    rest = [f"{d}: {notes[m]}" for d, m in (("requests", meaning.requests), ("tokens", meaning.tokens))
            if m not in FOLLOWED]  # fmt: skip
    return "on: follows " + " and ".join(followed) + (f" ({'; '.join(rest)})" if rest else "")

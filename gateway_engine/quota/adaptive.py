"""Shared keys: the buckets follow the remaining-quota headers the provider sends (docs/quota.md
"Shared keys"). The value types, and the in-process arithmetic the ADAPT script of lua.py mirrors.

The rule, per dimension (requests → the RPM bucket, tokens → the TPM bucket): an answer says
``remaining`` is left until ``reset`` seconds from now. What the gateway granted since that answer's
request (the grant counters now minus the reservation's ``sent_mark``) is already on its way, so
``left = remaining − sent``. Until the reset the bucket refills at min(configured rate, left / reset)
and its level is at most ``left``; when the reset passes, the configured rate returns. Nothing here
ever raises a level or a rate above what the configured limits give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .types import AdaptiveView, ProviderLimits

# an outside-use estimate spans at least this long (ms), and a window older than this starts over
OUTSIDE_MIN_MS = 1000.0
OUTSIDE_STALE_MS = 10_000.0
# an outside-use estimate older than this is not shown
OUTSIDE_SHOWN_MS = 60_000.0


@dataclass(frozen=True)
class Remaining:
    """One dimension of an answer's headers: ``remaining`` left until ``reset_seconds`` from now."""

    remaining: float
    reset_seconds: float

    def believable(self, per_minute: int) -> bool:
        """Finite, not negative, and not more than the configured per-minute limit allows."""
        finite = math.isfinite(self.remaining) and math.isfinite(self.reset_seconds)
        return finite and 0 <= self.remaining <= per_minute and self.reset_seconds >= 0


@dataclass(frozen=True)
class RemainingQuota:
    """What one answer says is left (None: that dimension was not reported, or was not believable)."""

    requests: Remaining | None = None
    tokens: Remaining | None = None

    def checked(self, limits: ProviderLimits) -> RemainingQuota:
        """Only the believable dimensions (a value above the configured limits is dropped: the
        configured limits are never exceeded)."""
        req = self.requests if self.requests and self.requests.believable(limits.rpm) else None
        tok = self.tokens if self.tokens and self.tokens.believable(limits.tpm) else None
        return RemainingQuota(req, tok)

    @property
    def empty(self) -> bool:
        return self.requests is None and self.tokens is None


@dataclass
class Slowdown:
    """An adjusted refill: at most ``rate`` per ms until ``until`` (store ms)."""

    rate: float
    until: float


def slowed_level(
    v: float, elapsed_from: float, now: float, rate: float, cap: float, slow: Slowdown | None
) -> float:
    """A level ``v`` at ``elapsed_from`` refilled to ``now``: at min(rate, slow.rate) until slow.until,
    then at ``rate``; clamped to ``cap`` (lua.py ``alevel``)."""
    elapsed = max(0.0, now - elapsed_from)
    if slow is not None and slow.until > elapsed_from:
        part = min(now, slow.until) - elapsed_from
        return min(cap, v + part * min(rate, slow.rate) + (elapsed - part) * rate)
    return min(cap, v + elapsed * rate)


def slowed_wait(have: float, need: float, now: float, rate: float, slow: Slowdown | None) -> float:
    """ms until a level ``have`` reaches ``need`` (0: it does), refilling as ``slowed_level`` (lua.py ``ashort``)."""
    eps = 1e-9
    if rate <= 0 or have >= need - eps:
        return 0.0
    if slow is not None and slow.until > now:
        slower = min(rate, slow.rate)
        gain = (slow.until - now) * slower
        if have + gain >= need - eps:
            return (need - have) / slower
        return (slow.until - now) + (need - have - gain) / rate
    return (need - have) / rate


@dataclass
class OutsideWindow:
    """The start of an outside-use estimate: when, what the provider said was left, the grant counter,
    the reset it said then."""

    at: float
    remaining: float
    mark: int
    reset_ms: float


@dataclass
class Dimension:
    """One dimension's adjusted state in the in-process store (the r* / t* fields of lua.py)."""

    slow: Slowdown | None = None
    window: OutsideWindow | None = None
    outside: tuple[float, float] | None = None  # (per ms, when estimated)


@dataclass
class AdaptiveCell:
    """A provider's adjusted state in the in-process store: per dimension, and the grant counters."""

    requests: Dimension = field(default_factory=Dimension)
    tokens: Dimension = field(default_factory=Dimension)
    granted: list[int] = field(default_factory=lambda: [0, 0])  # requests, tokens (lua.py n, k)

    def grant(self, tokens: int) -> tuple[int, int]:
        self.granted[0] += 1
        self.granted[1] += int(tokens)
        return self.granted[0], self.granted[1]

    def follow(
        self, now: float, levels: tuple[float, float], limits: ProviderLimits, mark: tuple[int, int] | None,
        quota: RemainingQuota,
    ) -> tuple[float, float]:  # fmt: skip
        """Apply an answer's (checked) remaining quota; the RPM and TPM levels after it."""
        marks = mark if mark is not None else (-1, -1)
        r = follow_dimension(
            self.requests, now, levels[0], self.granted[0], marks[0], quota.requests, limits.rpm_per_ms
        )
        t = follow_dimension(
            self.tokens, now, levels[1], self.granted[1], marks[1], quota.tokens, limits.tpm_per_ms
        )
        return r, t

    def view(self, now: float, limits: ProviderLimits) -> AdaptiveView:
        def rate(d: Dimension, configured: float) -> float | None:
            if d.slow is None or d.slow.until <= now:
                return None
            return min(configured, d.slow.rate) * 60_000.0

        def outside(d: Dimension) -> float | None:
            if d.outside is None or now - d.outside[1] > OUTSIDE_SHOWN_MS:
                return None
            return d.outside[0] * 60_000.0

        return AdaptiveView(
            rate(self.requests, limits.rpm_per_ms),
            rate(self.tokens, limits.tpm_per_ms),
            outside(self.requests),
            outside(self.tokens),
        )


def follow_dimension(
    d: Dimension, now: float, level: float, count: int, mark: int, said: Remaining | None, rate: float
) -> float:
    """One dimension of ``AdaptiveCell.follow`` (lua.py ``follow``): the level after the answer."""
    if said is None:
        return level
    sent = count - mark if 0 <= mark <= count else 0
    left = max(0.0, said.remaining - sent)
    reset_ms = said.reset_seconds * 1000.0
    d.slow = Slowdown(min(rate, left / reset_ms), now + reset_ms) if reset_ms > 0 else None
    w = d.window
    if w is None or now - w.at > OUTSIDE_STALE_MS or mark < 0:
        d.window = OutsideWindow(now, said.remaining, mark, reset_ms)
    elif now - w.at >= OUTSIDE_MIN_MS and mark >= w.mark:
        span = now - w.at
        used = w.remaining - said.remaining + rate * min(span, w.reset_ms)
        d.outside = (max(0.0, used - (mark - w.mark)) / span, now)
        d.window = OutsideWindow(now, said.remaining, mark, reset_ms)
    return min(level, left)

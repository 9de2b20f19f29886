"""Capacity advisor: the seed's rule of thumb for a provider's concurrency.

    max_concurrency ≈ p50 latency (s) × RPM / 60 × 1.2

Little's law: to use the whole RPM, as many calls must be in flight as arrive during one latency, plus
20 % headroom. Too low: leases saturate while the RPM bucket stays full (traffic waits locally for a
slot, the provider is under-used). Too high: more slots than the RPM can feed — bursts at the
provider, longer tails, 429s. Pure functions beside the other sizing rules (``fair.buffer_target``); the
providers page feeds them observed numbers (``dashboard.selectors.capacity``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HEADROOM = 1.2
TOO_HIGH_FACTOR = 2.0  # flag "too high" only when more than twice the suggestion (and 2 slots above it)
BUCKET_FULL_PCT = 80.0


@dataclass(frozen=True)
class CapacityAdvice:
    provider: str
    p50_latency_ms: float | None
    samples: int
    rpm: int
    max_concurrency: int
    suggested: int | None
    verdict: str  # ok | too_low | too_high | no_data
    reason: str


def suggested_concurrency(p50_latency_ms: float, rpm: int) -> int:
    return max(1, math.ceil(p50_latency_ms / 1000.0 * rpm / 60.0 * HEADROOM))


def advise(
    provider: str,
    *,
    p50_latency_ms: float | None,
    samples: int,
    rpm: int,
    max_concurrency: int,
    leases_in_flight: int | None = None,
    rpm_fill_pct: float | None = None,
) -> CapacityAdvice:
    if p50_latency_ms is None or samples == 0:
        return CapacityAdvice(
            provider, None, 0, rpm, max_concurrency, None, "no_data", "no finished calls in the window"
        )
    want = suggested_concurrency(p50_latency_ms, rpm)
    evidence = []
    if leases_in_flight is not None and leases_in_flight >= max_concurrency:
        evidence.append("leases saturated now")
    if rpm_fill_pct is not None and rpm_fill_pct >= BUCKET_FULL_PCT:
        evidence.append("RPM bucket full")
    if max_concurrency < want:
        verdict = "too_low"
        reason = (
            f"{max_concurrency} slots cannot carry {rpm} rpm at p50 {p50_latency_ms:.0f} ms; raise to {want}"
        )
    elif max_concurrency > max(want * TOO_HIGH_FACTOR, want + 2):
        verdict = "too_high"
        reason = f"{rpm} rpm at p50 {p50_latency_ms:.0f} ms needs about {want} slot{'s' if want != 1 else ''}; lower to {want}"
    else:
        verdict, reason = "ok", f"about {want} slot{'s' if want != 1 else ''} needed"
    if evidence and verdict == "too_low":  # an idle provider's bucket is full too: evidence only here
        reason += " (" + ", ".join(evidence) + ")"
    return CapacityAdvice(provider, p50_latency_ms, samples, rpm, max_concurrency, want, verdict, reason)

"""One row of the providers page: a provider's safe config view joined with its live quota and breaker
state (dashboard.live) and its recent activity, plus the percentages and waits the page's bars show.
The capacity advisor (dashboard.selectors.capacity) reads these rows too."""

from __future__ import annotations

from typing import Any

from providers import pauses as provider_pauses

from . import live
from .selectors.providers import ProviderConfigView, RecentProviderActivity


def provider_row(
    view: ProviderConfigView,
    quota: live.LiveState,
    breakers: live.LiveState,
    recent: dict[str, RecentProviderActivity],
    pauses: live.LiveState | None = None,
) -> dict[str, Any]:
    state = quota.by_provider.get(view.name)
    breaker = breakers.by_provider.get(view.name)
    pause = pauses.by_provider.get(view.name) if pauses is not None else None
    return {
        "config": view,
        "quota": state,
        "pause": pause,
        "pause_badge": provider_pauses.badge(pause) if pause is not None else "",
        "token_buckets": _token_buckets(state, view),
        "breaker": breaker["state"] if breaker is not None else None,
        "breaker_detail": live.breaker_detail(breaker),
        "recent": recent.get(view.name),
        "rpm_wait_ms": live.bucket_wait_ms(getattr(state, "rpm_tokens_available", None), view.rpm),
        "tpm_wait_ms": live.bucket_wait_ms(getattr(state, "tpm_tokens_available", None), view.tpm),
        "rpm_pct": _pct(getattr(state, "observed_rpm", None), view.rpm),
        "tpm_pct": _pct(getattr(state, "observed_tpm", None), view.tpm),
        "lease_pct": _pct(getattr(state, "leases_in_flight", None), view.max_concurrency),
        "rpm_fill_pct": _pct(
            getattr(state, "rpm_tokens_available", None), getattr(state, "rpm_capacity", None)
        ),
        "tpm_fill_pct": _pct(
            getattr(state, "tpm_tokens_available", None), getattr(state, "tpm_capacity", None)
        ),
    }


def _token_buckets(state, view: ProviderConfigView) -> list[dict[str, Any]]:
    """The ITPM / OTPM buckets of a provider that sets them, as far as the quota snapshot reports them
    (``itpm_tokens_available`` / ``itpm_capacity``, the same for otpm; None where it does not)."""
    out = []
    for bucket, rate in (("ITPM", view.itpm), ("OTPM", view.otpm)):
        if not rate:
            continue
        key = bucket.lower()
        available = getattr(state, f"{key}_tokens_available", None)
        capacity = getattr(state, f"{key}_capacity", None)
        out.append(
            {
                "name": bucket,
                "rate": rate,
                "available": available,
                "capacity": capacity,
                "fill_pct": _pct(available, capacity),
            }
        )
    return out


def _pct(part, whole) -> float | None:
    if part is None or not whole:
        return None
    return max(0.0, min(100.0, 100.0 * float(part) / float(whole)))

"""One row of the providers page: a provider's safe config view joined with its live quota and breaker
state (dashboard.live) and its recent activity, plus the percentages and waits the page's bars show.
The capacity advisor (dashboard.selectors.capacity) reads these rows too."""

from __future__ import annotations

from typing import Any

from . import live
from .selectors.providers import ProviderConfigView, RecentProviderActivity


def provider_row(
    view: ProviderConfigView,
    quota: live.LiveState,
    breakers: live.LiveState,
    recent: dict[str, RecentProviderActivity],
) -> dict[str, Any]:
    state = quota.by_provider.get(view.name)
    breaker = breakers.by_provider.get(view.name)
    return {
        "config": view,
        "quota": state,
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


def _pct(part, whole) -> float | None:
    if part is None or not whole:
        return None
    return max(0.0, min(100.0, 100.0 * float(part) / float(whole)))

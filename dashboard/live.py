"""Live provider state for the providers page: quota buckets, leases and circuit breakers.

The quota store (providers.limits.snapshot_all_sync) and the breaker (providers.shared_breaker.
breaker_snapshot_sync) own that state; this module only asks them for a snapshot. When they cannot
answer (Redis down) the page shows the error in a banner ("quota store unavailable: …") instead of
crashing or inventing numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway_engine.quota.types import ProviderLimits
from providers.limits import snapshot_all_sync
from providers.limits.factory import provider_pauses_sync
from providers.shared_breaker import breaker_snapshot_sync


@dataclass
class LiveState:
    by_provider: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def quota_states(limits: list[ProviderLimits]) -> LiveState:
    """ProviderQuotaState per provider name, or the reason there is none."""
    if not limits:
        return LiveState()
    try:
        return LiveState(by_provider={state.provider: state for state in snapshot_all_sync(limits)})
    except Exception as exc:  # noqa: BLE001 - shown to the operator verbatim
        return LiveState(error=f"quota store unavailable: {_describe(exc)}")


def pause_states(names: list[str]) -> LiveState:
    """The provider pause (PauseState: quota exhausted, per-day quota) per paused provider name, or the
    reason there is none."""
    if not names:
        return LiveState()
    try:
        return LiveState(by_provider=provider_pauses_sync(names))
    except Exception as exc:  # noqa: BLE001 - shown to the operator verbatim
        return LiveState(error=f"provider pauses unavailable: {_describe(exc)}")


def breaker_states(names: list[str]) -> LiveState:
    """Breaker snapshot (BreakerState.as_dict()) per provider name, or the reason there is none."""
    if not names:
        return LiveState()
    try:
        return LiveState(by_provider=breaker_snapshot_sync(names))
    except Exception as exc:  # noqa: BLE001 - shown to the operator verbatim
        return LiveState(error=f"breaker state unavailable: {_describe(exc)}")


def breaker_detail(state: dict | None) -> str:
    """A one-line explanation: failures in a row, window failures, time until a probe."""
    if not state:
        return ""
    parts = []
    if state.get("open_remaining_ms"):
        parts.append(f"probe in {int(state['open_remaining_ms']) / 1000:.1f} s")
    if state.get("consecutive_failures"):
        parts.append(f"{state['consecutive_failures']} failures in a row")
    if state.get("window_requests"):
        parts.append(f"{state.get('window_failures', 0)}/{state['window_requests']} failed in window")
    if state.get("opened_count"):
        parts.append(f"opened {state['opened_count']}×")
    return ", ".join(parts)


def bucket_wait_ms(available: float | None, rate_per_minute: float, need: float = 1.0) -> int | None:
    """Time until a bucket holding `available` and refilling at `rate_per_minute` holds `need`."""
    if available is None or rate_per_minute <= 0:
        return None
    missing = need - float(available)
    return 0 if missing <= 0 else int(missing / (rate_per_minute / 60_000.0) + 0.999)

"""Live provider state for the providers page: quota buckets, leases and circuit breakers.

The quota engine (providers.quota) and the breaker (providers.breaker) own that state; this module
only asks them for a snapshot. When they cannot answer (Redis down, function missing) the page shows
the error in a banner ("quota store unavailable: …") instead of crashing or inventing numbers.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from gateway_engine.quota.types import ProviderLimits

QUOTA_MODULE = "providers.quota"
QUOTA_FUNCTIONS = ("snapshot_all_sync", "snapshot_many_sync", "snapshots_sync")
BREAKER_MODULE = "providers.breaker"
BREAKER_FUNCTIONS = ("breaker_snapshot_sync", "snapshot_all_sync")


@dataclass
class LiveState:
    by_provider: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _find(module_name: str, names: tuple[str, ...]):
    module = importlib.import_module(module_name)
    for name in names:
        fn = getattr(module, name, None)
        if callable(fn):
            return fn
    raise LookupError(f"{module_name} has none of {', '.join(names)}")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _by_name(result: Any, attr: str = "provider") -> dict[str, Any]:
    if isinstance(result, dict):
        return dict(result)
    out = {}
    for entry in result or ():
        name = getattr(entry, attr, None) or getattr(entry, "name", None)
        if name is None and isinstance(entry, dict):
            name = entry.get(attr) or entry.get("name")
        if name is not None:
            out[name] = entry
    return out


def quota_states(limits: list[ProviderLimits]) -> LiveState:
    """ProviderQuotaState per provider name, or the reason there is none."""
    if not limits:
        return LiveState()
    try:
        fn = _find(QUOTA_MODULE, QUOTA_FUNCTIONS)
        return LiveState(by_provider=_by_name(fn(limits)))
    except Exception as exc:  # noqa: BLE001 - shown to the operator verbatim
        return LiveState(error=f"quota store unavailable: {_describe(exc)}")


def breaker_states(names: list[str]) -> LiveState:
    """Breaker snapshot per provider name (whatever shape providers.breaker returns)."""
    if not names:
        return LiveState()
    try:
        fn = _find(BREAKER_MODULE, BREAKER_FUNCTIONS)
        return LiveState(by_provider=_by_name(fn(names)))
    except Exception as exc:  # noqa: BLE001 - shown to the operator verbatim
        return LiveState(error=f"breaker state unavailable: {_describe(exc)}")


def breaker_label(state: Any) -> str:
    """'closed' / 'open' / 'half_open' from an enum, a string, an object or a dict."""
    if state is None:
        return "unknown"
    value = state
    if isinstance(state, dict):
        value = state.get("state", state)
    elif hasattr(state, "state"):
        value = state.state
    value = getattr(value, "value", value)
    return str(value)


def breaker_detail(state: Any) -> str:
    """A one-line explanation: failures in a row, window failures, time until a probe."""
    if not isinstance(state, dict):
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

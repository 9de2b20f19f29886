"""Which items go through their provider's own batch API (docs/provider_batches.md): pure functions of
the batch's ``provider_batch`` mode, its completion window and the provider chosen for the item.

* ``auto`` (default): the item's provider (the route's priority/weight draw, ``routing.preferred_provider``,
  stored as the item's queue) has ``batch_api`` and the window is at least its
  ``batch_min_window_seconds``; a batch without a window stays real time.
* ``always``: every provider the item's route can reach must have a batch API (else submission refuses
  the batch naming ``provider_batch``); allowed without a window (no deadline guard then).
* ``never``: real time.
"""

from __future__ import annotations

from collections.abc import Iterable

from .routing import ProviderConfig

MODES = ("auto", "never", "always")


def goes_to_batch_api(mode: str, window_seconds: float | None, provider: ProviderConfig | None) -> bool:
    """True when an item whose chosen provider is ``provider`` takes the provider-batch route."""
    if mode not in MODES:
        raise ValueError(f"provider_batch: must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "never" or provider is None or provider.batch is None or not provider.enabled:
        return False
    if mode == "always":
        return True
    return window_seconds is not None and window_seconds >= provider.batch.min_window_seconds


def lacking_batch_api(reachable: Iterable[ProviderConfig]) -> list[str]:
    """The names of the reachable providers without a batch API (what ``always`` refuses)."""
    return sorted({p.name for p in reachable if p.batch is None})

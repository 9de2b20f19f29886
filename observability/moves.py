"""The count of capacity moves (batches.execution.capacity): ``record_moves``, installed in
observability.apps through batches.execution.observers, adds the items a provider took from a held-back
peer's queue to ``gateway_capacity_moves_total{provider, from_provider}``."""

from __future__ import annotations

import logging

from django.conf import settings

from . import metrics

log = logging.getLogger(__name__)


def record_moves(provider: str, from_provider: str, n: int) -> None:
    """Count a capacity move (never raises: the items moved whether or not they are counted)."""
    if not settings.GATEWAY_METRICS_ENABLED:
        return
    try:
        metrics.capacity_moves.labels(provider, from_provider).inc(n)
    except Exception:  # noqa: BLE001 - the items moved; only their count is lost
        log.exception("capacity move of %d item(s) %s → %s not counted", n, from_provider, provider)

"""Which ``EngineObserver`` watches an engine run of a batch.

``batches`` sits below ``observability`` in the import layers (tests/architecture/test_layers.py): it
does not import the metrics observer, observability installs its factory here in its
``AppConfig.ready`` (observability.apps). With none installed a run is not observed (the engine's
null observer), which only happens outside the Django site (a bare script).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway_engine.observer import EngineObserver
from gateway_engine.routing import RoutingTable

ObserverFactory = Callable[[str, RoutingTable], EngineObserver | None]

_factory: ObserverFactory | None = None


def install(factory: ObserverFactory) -> None:
    """Set the factory every later run asks (observability.apps.ObservabilityConfig.ready)."""
    global _factory
    _factory = factory


def observer_for(batch_id: str, table: RoutingTable) -> EngineObserver | None:
    """The observer of one run (``batch_id`` "" for a dispatcher run serving many batches), or None."""
    return _factory(batch_id, table) if _factory is not None else None

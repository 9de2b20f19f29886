"""Who watches the engine runs and the results of a batch: the hooks observability installs.

``batches`` sits below ``observability`` in the import layers (tests/architecture/test_layers.py): it
does not import the metrics code, observability installs its factory and its recorder here in its
``AppConfig.ready`` (observability.apps).

* the ``EngineObserver`` factory: which observer watches an engine run (with none installed a run is
  not observed — the engine's null observer —, which only happens outside the Django site);
* the moves recorder: items a provider took from a held-back peer's queue (batches.execution.capacity);
* the served-results recorder: the item and token metrics of results served outside the engine (a
  provider's batch API, the cache), called by batches.execution.apply for the rows it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway_engine.items import ItemResult
from gateway_engine.observer import EngineObserver
from gateway_engine.routing import RoutingTable

# (batch_id, table, lane) -> the run's observer
ObserverFactory = Callable[[str, RoutingTable, str], EngineObserver | None]
# (batch_id, team name, [(result, served_by, endpoint)]) -> None; must not raise
ServedRecorder = Callable[[str, str, Sequence[tuple[ItemResult, str, str]]], None]

# (provider, from_provider, items) -> None; must not raise
MoveRecorder = Callable[[str, str, int], None]

_factory: ObserverFactory | None = None
_recorder: ServedRecorder | None = None
_moves: MoveRecorder | None = None


def install(factory: ObserverFactory) -> None:
    """Set the factory every later run asks (observability.apps.ObservabilityConfig.ready)."""
    global _factory
    _factory = factory


def observer_for(batch_id: str, table: RoutingTable, lane: str = "batch") -> EngineObserver | None:
    """The observer of one run (``batch_id`` "" for a dispatcher run serving many batches, or for the
    interactive lane: ``lane`` "interactive"), or None."""
    return _factory(batch_id, table, lane) if _factory is not None else None


def install_served_recorder(recorder: ServedRecorder) -> None:
    """Set what records results served outside the engine (observability.apps)."""
    global _recorder
    _recorder = recorder


def record_served(batch_id: str, team: str, results: Sequence[tuple[ItemResult, str, str]]) -> None:
    """Record the written results served outside the engine (nothing without a recorder installed)."""
    if _recorder is not None and results:
        _recorder(batch_id, team, results)


def install_move_recorder(recorder: MoveRecorder) -> None:
    """Set what counts capacity moves (observability.apps)."""
    global _moves
    _moves = recorder


def record_moves(provider: str, from_provider: str, n: int) -> None:
    """Count ``n`` items ``provider`` took from the held-back ``from_provider`` (nothing without one)."""
    if _moves is not None and n:
        _moves(provider, from_provider, n)

"""The engine's one observation seam: what happened, told to whoever listens (metrics, logs, traces).

Django-free and dependency-free. ``CrossProviderBatcher(observer=...)`` calls these methods from the
engine's event loop; an implementation must be quick and must not block (no I/O beyond a local file
write or an in-memory queue), and must never raise (the engine guards nothing around these calls).
The Prometheus/log/trace implementation lives outside the engine (``observability.engine``).
"""

from __future__ import annotations

from typing import Any, Protocol

from .items import ItemResult


class EngineObserver(Protocol):
    def on_run_start(self, batch_id: str, items: int) -> None:
        """An ``abatch`` call begins (one chunk of a batch in a worker)."""

    def on_run_end(self, batch_id: str) -> None:
        """That ``abatch`` call ended (normally or not)."""

    def on_attempt(
        self,
        provider: str,
        *,
        error_type: str,
        status_code: int | None,
        latency_s: float,
        prompt_tokens: int,
        completion_tokens: int,
        used: bool,
        custom_id: str,
        attempt: int,
        team: str = "",
        endpoint: str = "chat",
        batch_id: str = "",
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        """One HTTP attempt came back (``team``/``batch_id``: the item's; one run may serve many batches). ``error_type`` is "" on success; ``used`` is False when the answer
        is not the item's result (its tokens are wasted). ``cached_tokens`` / ``cache_write_tokens``:
        the part of ``prompt_tokens`` read from / written to the provider's prompt cache."""

    def on_quota_wait(self, provider: str, seconds: float) -> None:
        """Time an attempt spent getting a bucket token, a lease and an in-flight slot."""

    def on_retry(self, provider: str, reason: str) -> None:
        """The engine will try again after a failed attempt at ``provider`` (reason = its error type)."""

    def on_provider_paused(self, provider: str, reason: str, until_epoch: float | None, message: str) -> None:
        """The engine paused ``provider`` for every worker after its answer said it refuses everyone
        (``reason`` ``billing``: until an operator clears it, ``until_epoch`` None; ``per_day_quota``:
        until the next midnight America/Los_Angeles). Called once per such answer (several in-flight
        items can each bring one)."""

    def on_item_done(self, result: ItemResult, *, team: str = "", batch_id: str = "") -> None:
        """An item reached its final result (an engine ``ItemResult``) — of that team and batch."""


class NullObserver:
    """The default: observes nothing."""

    def on_run_start(self, batch_id: str, items: int) -> None:
        pass

    def on_run_end(self, batch_id: str) -> None:
        pass

    def on_attempt(self, provider: str, **kwargs: Any) -> None:
        pass

    def on_quota_wait(self, provider: str, seconds: float) -> None:
        pass

    def on_retry(self, provider: str, reason: str) -> None:
        pass

    def on_provider_paused(self, provider: str, reason: str, until_epoch: float | None, message: str) -> None:
        pass

    def on_item_done(self, result: ItemResult, **kwargs: Any) -> None:
        pass


NULL_OBSERVER: EngineObserver = NullObserver()

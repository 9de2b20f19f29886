"""The engine observer: Prometheus counters, the failed-item log event and GenAI spans.

``batches.execution.build_batcher`` passes ``engine_observer(batch_id, table)`` to the engine
(``gateway_engine.observer.EngineObserver``). One instance per engine run; its methods run on the
engine's event loop and only touch in-memory counters (or the multiprocess files), a logger, and the
span processor.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from urllib.parse import urlsplit

from gateway_engine.endpoints import CHAT
from gateway_engine.observer import NullObserver
from gateway_engine.retry import error_class
from providers.pricing import Prices, price_of, token_cost

from . import metrics, tracing
from .logs import current_request_id

log = logging.getLogger("batches.items")
pause_log = logging.getLogger("providers.pauses")
_failed_hooks: set[str] = set()


def _off_the_loop(write, *args) -> None:
    """Run a database write from an observer hook: the hooks run on the engine's event loop, where
    Django refuses the ORM, so it runs (and is waited for: a pause is rare) in a thread of its own,
    with that thread's connection closed after. Errors reach the caller (_never_raises logs them)."""
    from django.db import connection

    errors: list[BaseException] = []

    def target() -> None:
        try:
            write(*args)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=target, name="observer-db-write")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def _never_raises(method):
    """The engine calls observers unguarded: a metrics or tracing failure is logged (once per hook and
    process) and never reaches the item being run."""

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception:  # noqa: BLE001
            if method.__name__ not in _failed_hooks:
                _failed_hooks.add(method.__name__)
                logging.getLogger(__name__).exception("engine observer %s failed", method.__name__)
            return None

    return wrapped


# the statuses gateway_items_total counts (docs/operations.md); an engine result "released" (not sent,
# handed back to be queued again) is no final state: the item is counted once it ends
FINAL_ITEM_STATUSES = frozenset({"succeeded", "failed", "cancelled", "expired"})


def outcome_label(error_type: str, status_code: int | None) -> str:
    """ok, 4xx, 429, 5xx, timeout, connection, invalid_response."""
    return "ok" if not error_type else error_class(error_type, status_code)


class GatewayObserver:
    def __init__(
        self,
        batch_id: str,
        team: str,
        prices: dict[str, Prices] | None = None,
        providers: dict | None = None,
        request_id: str = "",
        parent_context=None,
        lane: str = "batch",
    ):
        self.batch_id, self.team = str(batch_id), team
        self.lane = lane  # "batch" or "interactive": a label of the request and quota-wait metrics
        self.prices = prices or {}
        self.providers = providers or {}  # name -> ProviderConfig (model, base_url) for spans
        self.request_id = request_id
        self.parent_context = parent_context
        self.tracer = tracing.get_tracer()
        # one span per batch seen in this run (a dispatcher run serves items of many batches)
        self._batch_spans: dict[str, tuple[object, object]] = {}
        self._items = 0

    # ---- run ---------------------------------------------------------------------------------------
    @_never_raises
    def on_run_start(self, batch_id: str, items: int) -> None:
        metrics.engine_runs.inc()
        self._items = items
        if self.batch_id:
            self._batch_context(self.batch_id, self.team)

    def _batch_context(self, batch_id: str, team: str):
        """The span context of ``batch_id`` in this run (started on first use; None without tracing)."""
        if self.tracer is None or not batch_id:
            return None
        known = self._batch_spans.get(batch_id)
        if known is None:
            from opentelemetry import trace

            span = self.tracer.start_span(
                f"batch {batch_id}",
                context=self.parent_context,
                attributes={"gateway.batch_id": batch_id, "gateway.team": team, "gateway.items": self._items},
            )
            known = self._batch_spans[batch_id] = (span, trace.set_span_in_context(span))
        return known[1]

    @_never_raises
    def on_run_end(self, batch_id: str) -> None:
        metrics.engine_runs.dec()
        spans, self._batch_spans = self._batch_spans, {}
        for span, _ in spans.values():
            span.end()

    # ---- attempts ----------------------------------------------------------------------------------
    @_never_raises
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
        custom_id: str = "",
        attempt: int = 0,
        team: str = "",
        batch_id: str = "",
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
        endpoint: str = CHAT,
    ) -> None:
        team, batch_id = team or self.team, batch_id or self.batch_id
        outcome = outcome_label(error_type, status_code)
        metrics.provider_requests.labels(provider, outcome, self.lane).inc()
        metrics.provider_request_duration.labels(provider).observe(latency_s)
        tokens = metrics.provider_tokens
        if prompt_tokens:
            tokens.labels(provider, team, "prompt", endpoint).inc(prompt_tokens)
        if completion_tokens:
            tokens.labels(provider, team, "completion", endpoint).inc(completion_tokens)
        if not used and (prompt_tokens or completion_tokens):
            tokens.labels(provider, team, "wasted", endpoint).inc(prompt_tokens + completion_tokens)
        # the prompt-cache parts of prompt_tokens (already counted in "prompt"), kinds of their own
        if cached_tokens:
            tokens.labels(provider, team, "cached", endpoint).inc(cached_tokens)
        if cache_write_tokens:
            tokens.labels(provider, team, "cache_write", endpoint).inc(cache_write_tokens)
        if prompt_tokens or completion_tokens:
            cost = token_cost(
                price_of(self.prices, (provider, endpoint)),
                prompt_tokens,
                completion_tokens,
                cached_tokens=cached_tokens,
                cache_write_tokens=cache_write_tokens,
            )
            if cost is not None:
                metrics.provider_cost.labels(provider, team, endpoint).inc(float(cost))
        if self.tracer is not None:
            self._span(
                provider,
                outcome,
                status_code,
                latency_s,
                prompt_tokens,
                completion_tokens,
                custom_id,
                attempt,
                team,
                batch_id,
            )

    def _span(
        self,
        provider,
        outcome,
        status_code,
        latency_s,
        prompt,
        completion,
        custom_id,
        attempt,
        team,
        batch_id,
    ) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        config = self.providers.get(provider)
        model = getattr(config, "model", "") or ""
        end = time.time_ns()
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": int(prompt),
            "gen_ai.usage.output_tokens": int(completion),
            "gateway.batch_id": batch_id,
            "gateway.custom_id": custom_id,
            "gateway.attempt": attempt,
        }
        url = urlsplit(getattr(config, "base_url", "") or "")
        if url.hostname:
            attributes["server.address"] = url.hostname
            if url.port:
                attributes["server.port"] = url.port
        if status_code is not None:
            attributes["http.response.status_code"] = status_code
        if outcome != "ok":
            attributes["error.type"] = str(status_code) if status_code else outcome
        span = self.tracer.start_span(
            f"chat {model}".strip(),
            context=self._batch_context(batch_id, team) or self.parent_context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=end - int(latency_s * 1e9),
        )
        if outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end(end_time=end)

    @_never_raises
    def on_quota_wait(self, provider: str, seconds: float) -> None:
        metrics.quota_wait.labels(provider, self.lane).observe(max(0.0, seconds))

    @_never_raises
    def on_retry(self, provider: str, reason: str) -> None:
        metrics.retries.labels(provider, reason or "unknown").inc()

    # ---- provider pauses ---------------------------------------------------------------------------
    @_never_raises
    def on_provider_paused(self, provider: str, reason: str, until_epoch: float | None, message: str) -> None:
        """The engine paused ``provider`` for every worker (billing exhausted, per-day quota): an error
        log line an operator is alerted by, and an entry in the audit history."""
        from gateway_engine.quota.types import PauseState
        from providers import pauses

        state = PauseState(provider=provider, reason=reason, until_epoch=until_epoch, message=message)
        pause_log.error(
            "provider %s paused for every worker: %s",
            provider,
            pauses.describe(state),
            extra={
                "event": "provider_paused",
                "provider": provider,
                "reason": reason,
                "until_epoch": until_epoch,
                "detail": message,
                "batch_id": self.batch_id,
                "request_id": self.request_id,
            },
        )
        _off_the_loop(pauses.record_paused, provider, state)

    # ---- items -------------------------------------------------------------------------------------
    @_never_raises
    def on_item_done(self, result, *, team: str = "", batch_id: str = "") -> None:
        if result.status not in FINAL_ITEM_STATUSES:  # released: not sent, re-queued; it ends later
            return
        metrics.items.labels(result.status, self.lane).inc()
        if result.status == "failed":
            log.warning(
                "item failed",
                extra={
                    "event": "item_failed",
                    "batch_id": batch_id or self.batch_id,
                    "team": team or self.team,
                    "custom_id": result.custom_id,
                    "provider": result.provider,
                    "attempt": result.attempts,
                    "error_type": result.error_type,
                    "status_code": result.error_status_code,
                    "request_id": self.request_id,
                },
            )


class PauseOnlyObserver(NullObserver):
    """With GATEWAY_METRICS_ENABLED off: no metrics, but a provider pause is still logged and audited
    (an operator must learn that a provider stopped taking requests)."""

    def __init__(self, batch_id: str):
        self.batch_id, self.request_id = str(batch_id), current_request_id()

    on_provider_paused = GatewayObserver.on_provider_paused


def engine_observer(batch_id: str, table=None, lane: str = "batch") -> GatewayObserver | PauseOnlyObserver:
    """The observer for one engine run of a batch (two small queries: the team's name, the prices);
    only the provider-pause hook when GATEWAY_METRICS_ENABLED is off."""
    from django.conf import settings

    from batches.models import Batch

    if not settings.GATEWAY_METRICS_ENABLED:
        return PauseOnlyObserver(batch_id)
    from providers.pricing import prices_by_provider

    # a dispatcher run serves many batches (batch_id ""): the team then comes with each item
    team = (
        (Batch.objects.filter(id=batch_id).values_list("team__name", flat=True).first() or "")
        if batch_id
        else ""
    )
    parent = None
    if tracing.enabled():
        from opentelemetry import context

        parent = context.get_current()
    return GatewayObserver(
        str(batch_id),
        team,
        prices=prices_by_provider(),
        providers=dict(getattr(table, "providers", {}) or {}),
        request_id=current_request_id(),
        parent_context=parent,
        lane=lane,
    )

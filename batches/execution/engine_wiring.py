"""The engine wired to this deployment: routing table from the database, options from settings."""

from __future__ import annotations

from django.conf import settings

from batches.models import BatchItem
from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy, RetryState, WorkItem
from gateway_engine.routing import RoutingTable
from providers.adapters import routing_table_from_models
from providers.models import Provider, RoutingRule

from . import observers


def load_routing_table() -> RoutingTable:
    """Every provider and routing rule as plain dataclasses (disabled ones are skipped by routing)."""
    return routing_table_from_models(Provider.objects.all(), RoutingRule.objects.select_related("provider"))


def engine_options() -> EngineOptions:
    return EngineOptions(
        default_max_tokens=int(settings.GATEWAY_DEFAULT_MAX_TOKENS),
        retry=RetryPolicy(
            base_seconds=float(settings.GATEWAY_RETRY_BASE_SECONDS),
            cap_seconds=float(settings.GATEWAY_RETRY_CAP_SECONDS),
            max_rate_limit_wait_seconds=float(settings.GATEWAY_MAX_RATE_LIMIT_WAIT_SECONDS),
        ),
        max_breaker_wait_seconds=float(settings.GATEWAY_MAX_BREAKER_WAIT_SECONDS),
        max_answer_bytes=int(settings.GATEWAY_MAX_ANSWER_BYTES),
        store_outage_seconds=float(settings.GATEWAY_OUTAGE_RIDE_SECONDS),
    )


def build_batcher(table: RoutingTable | None = None, *, owner: str = "") -> CrossProviderBatcher:
    """The engine of one dispatcher slice (it serves many batches), wired to the shared quota store,
    breaker and live limits (chosen by settings), and, for a claim ``owner``, to that owner's attempt
    journal (batches.execution.journal)."""
    from providers.limits import LimitsSource, get_quota_store
    from providers.shared_breaker import get_breaker

    from .journal import journal_for

    table = table or load_routing_table()
    return CrossProviderBatcher(
        table,
        store=get_quota_store(),
        breaker=get_breaker(),
        limits_source=LimitsSource.shared(),
        options=engine_options(),
        observer=observers.observer_for("", table),
        journal=journal_for(owner) if owner else None,
    )


def work_item(item: BatchItem, *, deadline: float | None = None, team: str = "") -> WorkItem:
    payload = item.payload or {}
    return WorkItem(
        custom_id=item.custom_id,
        messages=payload.get("messages") or [],
        params=dict(payload.get("params") or {}),
        route=item.route,
        provider=item.requested_provider,
        key=item.custom_id,
        deadline=deadline,
        batch_id=str(item.batch_id),
        team=team,
        carried=RetryState.from_dict(item.retry_state),
        endpoint=item.endpoint,  # type: ignore[arg-type]  # the model's choices are ENDPOINTS
        input=payload.get("input"),
        prefer=item.queue_provider if item.moved_from else "",  # a capacity move: its new queue first
    )

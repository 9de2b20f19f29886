"""OpenTelemetry: on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the OTLP/HTTP exporter reads the OTEL_*
variables itself: endpoint, headers, ``OTEL_SERVICE_NAME``). Django and Celery are instrumented; the
engine's provider calls become GenAI spans (``observability.engine``), children of a batch span.

Tests install their own provider (``use_provider``) with an in-memory exporter.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_provider = None  # the TracerProvider spans go to, or None (tracing off)
_instrumented = False


def enabled() -> bool:
    return _provider is not None


def get_tracer():
    """A tracer of the configured provider, or None when tracing is off."""
    if _provider is None:
        return None
    return _provider.get_tracer("batch-gateway")


def use_provider(provider) -> None:
    """Send the gateway's own spans to ``provider`` (None switches them off)."""
    global _provider
    _provider = provider


def configure_from_env() -> bool:
    """Called once per process at start (AppConfig.ready)."""
    global _instrumented
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _instrumented:
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "batch-gateway")})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    use_provider(provider)
    _instrumented = True
    try:
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().instrument(tracer_provider=provider)
    except Exception:  # noqa: BLE001 - tracing must never stop the gateway from starting
        log.warning("Django instrumentation unavailable", exc_info=True)
    try:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        CeleryInstrumentor().instrument(tracer_provider=provider)
    except Exception:  # noqa: BLE001
        log.warning("Celery instrumentation unavailable", exc_info=True)
    log.info("OpenTelemetry tracing on", extra={"event": "tracing_on"})
    return True

"""Gauges read at scrape time from the shared state (Redis, database), not from any one process.

Quota buckets and leases come from the quota store's ``snapshot_all_sync()``, provider pauses from its
``provider_pauses_sync()``, breakers from ``breaker_snapshot_sync()``; batches by status and queued items from PostgreSQL. When a source cannot
answer, its gauges are left out and ``gateway_scrape_errors{source}`` is 1 (the scrape still answers).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import connection
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from providers.adapters import provider_limits

log = logging.getLogger(__name__)

BREAKER_VALUES = {"closed": 0, "half_open": 1, "open": 2}


def _providers():
    from providers.models import Provider

    return [provider_limits(p) for p in Provider.objects.order_by("name")]


def quota_families(limits: list) -> list[Metric]:
    from providers.limits import snapshot_all_sync

    available = GaugeMetricFamily(
        "gateway_quota_tokens_available",
        "Tokens in a provider's bucket now (rpm: requests; tpm, itpm, otpm: tokens), shared by every worker.",
        labels=["provider", "bucket"],
    )
    capacity = GaugeMetricFamily(
        "gateway_quota_capacity",
        "A provider bucket's capacity (rate x burst_seconds / 60).",
        labels=["provider", "bucket"],
    )
    paused = GaugeMetricFamily(
        "gateway_quota_paused_seconds",
        "Seconds a Retry-After pause still holds a provider's bucket (0 when not paused).",
        labels=["provider"],
    )
    in_flight = GaugeMetricFamily(
        "gateway_leases_in_flight", "Concurrency leases held now, cluster-wide.", labels=["provider"]
    )
    leases_max = GaugeMetricFamily(
        "gateway_leases_max", "A provider's max_concurrency (lease slots).", labels=["provider"]
    )
    rpm = GaugeMetricFamily(
        "gateway_provider_configured_rpm", "A provider's configured requests per minute.", labels=["provider"]
    )
    adjusted = GaugeMetricFamily(
        "gateway_quota_adjusted_rate",
        "Shared keys: the per-minute rate a provider's bucket refills at while its remaining-quota headers "
        "hold it below the configured rate (adaptive providers; absent: the configured rate holds).",
        labels=["provider", "bucket"],
    )
    outside = GaugeMetricFamily(
        "gateway_quota_outside_use",
        "Shared keys: per minute, what the provider's headers say was used of its limit minus what the "
        "gateway sent (adaptive providers; absent: no estimate in the last minute).",
        labels=["provider", "bucket"],
    )
    for s in snapshot_all_sync(limits) if limits else []:
        _add_shared_keys(s, adjusted, outside)
        available.add_metric([s.provider, "rpm"], s.rpm_tokens_available)
        available.add_metric([s.provider, "tpm"], s.tpm_tokens_available)
        capacity.add_metric([s.provider, "rpm"], s.rpm_capacity)
        capacity.add_metric([s.provider, "tpm"], s.tpm_capacity)
        for bucket in ("itpm", "otpm"):  # only for providers that set them (the snapshot's 0 otherwise)
            if getattr(s, f"{bucket}_capacity", 0):
                available.add_metric([s.provider, bucket], getattr(s, f"{bucket}_tokens_available"))
                capacity.add_metric([s.provider, bucket], getattr(s, f"{bucket}_capacity"))
        paused.add_metric([s.provider], s.wait_ms / 1000.0 if s.paused_until_ms else 0.0)
        in_flight.add_metric([s.provider], s.leases_in_flight)
        leases_max.add_metric([s.provider], s.max_concurrency)
        rpm.add_metric([s.provider], s.configured_rpm)
    return [available, capacity, paused, in_flight, leases_max, rpm, adjusted, outside]


def _add_shared_keys(s, adjusted: GaugeMetricFamily, outside: GaugeMetricFamily) -> None:
    """One provider snapshot's shared-key samples: the adjusted rate and the outside use, per bucket."""
    for bucket, rate, used in (
        ("rpm", s.adjusted_rpm, s.outside_rpm),
        ("tpm", s.adjusted_tpm, s.outside_tpm),
    ):
        if rate is not None:
            adjusted.add_metric([s.provider, bucket], rate)
        if used:
            outside.add_metric([s.provider, bucket], used)


def breaker_family(names: list[str]) -> Metric:
    from providers.shared_breaker import breaker_snapshot_sync

    family = GaugeMetricFamily(
        "gateway_breaker_state", "Circuit breaker: 0 closed, 1 half-open, 2 open.", labels=["provider"]
    )
    for name, state in (breaker_snapshot_sync(names) if names else {}).items():
        family.add_metric([name], BREAKER_VALUES.get(state.get("state"), -1))
    return family


def pause_family(names: list[str]) -> Metric:
    """gateway_provider_paused{provider,reason}: 1 while the engine has paused the provider for every
    worker (reason billing, per_day_quota, …; providers.pauses), else 0 with reason "none"."""
    from providers.limits.factory import provider_pauses_sync

    family = GaugeMetricFamily(
        "gateway_provider_paused",
        "1 while a provider is paused for every worker (quota exhausted, per-day quota) until an operator "
        "clears it or its quota period ends; 0 (reason none) otherwise.",
        labels=["provider", "reason"],
    )
    paused = provider_pauses_sync(names) if names else {}
    for name in names:
        state = paused.get(name)
        family.add_metric([name, state.reason if state else "none"], 1 if state else 0)
    return family


def database_families() -> list[Metric]:
    from batches.models import Batch, BatchItem, BatchStatus, ItemStatus

    batches = GaugeMetricFamily("gateway_batches", "Batches by status.", labels=["status"])
    counts = dict(Batch.objects.values_list("status").annotate(n=Count("id")).order_by())
    for status in BatchStatus.values:
        batches.add_metric([status], counts.get(status, 0))
    queued = GaugeMetricFamily(
        "gateway_queue_items",
        "Items not yet started, by the scheduler's provider queue and the batch priority.",
        labels=["provider", "priority"],
    )
    rows = (
        BatchItem.objects.filter(status=ItemStatus.PENDING)
        .values_list("queue_provider", "batch__priority")
        .annotate(n=Count("id"))
        .order_by()
    )
    for provider, priority, n in rows:
        queued.add_metric([provider or "unassigned", priority], n)
    return [batches, queued]


def provider_batch_families() -> list[Metric]:
    """Provider batches by provider and state, and their lines by outcome (docs/provider_batches.md)."""
    from provider_batches.models import ChunkState
    from provider_batches.selectors import counts_by_state, lines_by_outcome

    chunks = GaugeMetricFamily(
        "gateway_provider_batches",
        "Provider batches (provider batch APIs) by state.",
        labels=["provider", "state"],
    )
    counts = counts_by_state()
    for provider in sorted({p for p, _ in counts}):
        for state in ChunkState.values:
            chunks.add_metric([provider, state], counts.get((provider, state), 0))
    lines = GaugeMetricFamily(
        "gateway_provider_batch_lines",
        "Lines of the stored provider batches by outcome: as the provider reported them (succeeded, "
        "errored, canceled, expired) and what the gateway did (applied, to_realtime).",
        labels=["provider", "outcome"],
    )
    for (provider, outcome), n in sorted(lines_by_outcome().items()):
        lines.add_metric([provider, outcome], n)
    return [chunks, lines]


class LiveStateCollector:
    """A prometheus_client collector; register it on the registry that /metrics renders."""

    def collect(self) -> Iterator[Metric]:
        errors = GaugeMetricFamily(
            "gateway_scrape_errors", "1 when a live-state source could not be read.", labels=["source"]
        )
        try:
            limits = _providers()
            errors.add_metric(["providers"], 0)
        except Exception as exc:  # noqa: BLE001 - the scrape answers; the error is a metric and a log line
            log.warning("metrics: providers could not be read: %s", exc)
            limits = []
            errors.add_metric(["providers"], 1)
        for source, build in (
            ("quota", lambda: quota_families(limits)),
            ("breaker", lambda: [breaker_family([lim.name for lim in limits])]),
            ("pauses", lambda: [pause_family([lim.name for lim in limits])]),
            ("database", database_families),
            ("provider_batches", provider_batch_families),
        ):
            try:
                yield from build()
                errors.add_metric([source], 0)
            except Exception as exc:  # noqa: BLE001
                log.warning("metrics: %s state unavailable: %s", source, exc)
                errors.add_metric([source], 1)
        connection.close_if_unusable_or_obsolete()
        yield errors

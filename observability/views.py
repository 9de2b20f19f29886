"""Operations endpoints (docs/contract.md §7): /metrics, /healthz, /readyz. Thin: the work is in collector/health."""

from __future__ import annotations

import glob
import hmac
import os

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from . import health, metrics_dir
from .collector import LiveStateCollector


class _DefaultRegistry:
    """This process's own metrics (single-process mode)."""

    def collect(self):
        yield from REGISTRY.collect()


def _complete(path: str) -> bool:
    """A process creates its metrics file before it has written the 8-byte header: reading it then
    crashes the merge (a 500 mid-run). Such a file holds nothing yet; skip it until the next scrape."""
    try:
        return os.path.getsize(path) >= 8
    except OSError:  # removed between the glob and now (a dead process's live gauge)
        return False


def _multiprocess_collector():
    from prometheus_client import multiprocess

    class CompleteFilesCollector(multiprocess.MultiProcessCollector):
        def collect(self):
            files = [f for f in glob.glob(os.path.join(self._path, "*.db")) if _complete(f)]
            return self.merge(files, accumulate=True)

    return CompleteFilesCollector


class WorkerMetricsCollector:
    """``gateway_worker_metrics_collected``: 1 when this /metrics includes this host's worker processes,
    0 when it cannot (the same rule as /readyz's worker_metrics check, which says why). Never a silent 0
    provider requests: a scrape that misses the workers says so."""

    def collect(self):
        check = health.check_worker_metrics()
        family = GaugeMetricFamily(
            "gateway_worker_metrics_collected",
            "1 when /metrics includes the metrics of this host's worker processes (they write the "
            "multiprocess directory it reads), 0 when not (see /readyz worker_metrics for why).",
        )
        family.add_metric([], 0 if check.warn else 1)
        yield family


def metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    directory = settings.GATEWAY_METRICS_DIR
    if directory:
        if metrics_dir.is_derived(directory):
            # the default directory is this host's: live gauges of processes gone without an exit hook
            # (a pool child killed by SIGKILL) are dropped here, as mark_process_dead would have
            metrics_dir.sweep_dead_live_gauges(str(directory))
        _multiprocess_collector()(registry, path=str(directory))
    else:
        registry.register(_DefaultRegistry())
    registry.register(LiveStateCollector())
    registry.register(WorkerMetricsCollector())
    return registry


def _authorized(request) -> bool:
    token = settings.GATEWAY_METRICS_TOKEN
    if not token:
        return True
    given = request.META.get("HTTP_AUTHORIZATION", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


@never_cache
@require_GET
def metrics(request):
    if not _authorized(request):
        return HttpResponse("metrics token required\n", status=403, content_type="text/plain")
    return HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_LATEST)


@never_cache
def healthz(request):
    """Liveness: the process serves requests (no dependency is checked; that is /readyz)."""
    return JsonResponse({"ok": True})


@never_cache
def readyz(request):
    ready, body = health.readiness()
    return JsonResponse(body, status=200 if ready else 503)

"""The Prometheus settings: the multiprocess directory this host's processes share, the /metrics token,
and the listener that serves a worker host's metrics; ``base`` imports them all (``from .metrics import *``)
at the point where the directory must be set, before prometheus_client is first imported."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gateway_site.env import env_bool, env_str
from observability.metrics_dir import configure as configure_metrics_dir

# Prometheus multiprocess directory shared by this host's web and worker processes: PROMETHEUS_MULTIPROC_DIR,
# else (REDIS_URL set) a per-host default derived from REDIS_URL + GATEWAY_REDIS_PREFIX, created here and
# put in os.environ before prometheus_client is first imported; GATEWAY_METRICS_DIR=off (or an empty
# PROMETHEUS_MULTIPROC_DIR) = no files. "" = none in use (observability/metrics_dir.py). GET /metrics
# requires GATEWAY_METRICS_TOKEN as a bearer token when set; production refuses to start without one
# unless GATEWAY_METRICS_PUBLIC is on (metrics reachable only on an internal listener, #29).
try:
    _metrics_dir = configure_metrics_dir()
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None
GATEWAY_METRICS_DIR = _metrics_dir.path
GATEWAY_METRICS_DIR_SOURCE = _metrics_dir.source  # explicit, default, off, single-process, unavailable
GATEWAY_METRICS_DIR_PROBLEM = _metrics_dir.problem
GATEWAY_METRICS_TOKEN = env_str("GATEWAY_METRICS_TOKEN", "")
GATEWAY_METRICS_PUBLIC = env_bool("GATEWAY_METRICS_PUBLIC", False)
# Off: the engine observer is not installed (no provider metrics, failed-item events or provider-call
# spans); for measuring its overhead.
GATEWAY_METRICS_ENABLED = env_bool("GATEWAY_METRICS_ENABLED", True)
# A worker host has no web process to read its multiprocess directory: with HOST:PORT set, a Celery
# worker's main process serves GET /metrics (this host's directory, GATEWAY_METRICS_TOKEN as for the web)
# there (observability/worker_metrics.py). Unset: no listener (on one host the web's /metrics has them).
GATEWAY_WORKER_METRICS_BIND = env_str("GATEWAY_WORKER_METRICS_BIND", "")
if GATEWAY_WORKER_METRICS_BIND and (
    ":" not in GATEWAY_WORKER_METRICS_BIND or not GATEWAY_WORKER_METRICS_BIND.rsplit(":", 1)[1].isdigit()
):
    raise ImproperlyConfigured(
        f"GATEWAY_WORKER_METRICS_BIND={GATEWAY_WORKER_METRICS_BIND!r}: must be HOST:PORT (e.g. 0.0.0.0:9108)"
    )

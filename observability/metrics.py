"""Every Prometheus metric the gateway's processes export, in one place.

Processes write their counters and histograms to the multiprocess directory (web and worker processes of
one host share one: ``PROMETHEUS_MULTIPROC_DIR``, else a per-host default derived from ``REDIS_URL`` and
``GATEWAY_REDIS_PREFIX``, which the settings put in the environment before this module imports
prometheus_client; ``observability.metrics_dir``); ``GET /metrics`` sums the directory's files
(``observability.views.metrics``).
Without one (single-process mode, or turned off) the default in-memory registry is used, and in
multi-process mode /metrics then says so (``gateway_worker_metrics_collected 0``).

Live state (quota buckets, leases, breakers, batches and queued items) is NOT kept here: it is read from
Redis and the database at scrape time by ``observability.collector.LiveStateCollector``, so it is never
duplicated or stale per process.

The only in-process gauge is ``gateway_engine_runs`` with ``multiprocess_mode="livesum"``: the engine
runs in progress summed over the processes that are alive (a dead worker's file is dropped by
``mark_process_dead`` in the Celery/gunicorn exit hooks, and by /metrics for pids gone from the host).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from gateway_engine.retry import ERROR_CLASS_KEYS

provider_requests = Counter(
    "gateway_provider_requests",
    f"HTTP attempts sent to a provider, by outcome (ok, {', '.join(ERROR_CLASS_KEYS)}) and lane (batch, "
    "interactive).",
    ["provider", "outcome", "lane"],
)
provider_request_duration = Histogram(
    "gateway_provider_request_duration_seconds",
    "Latency of one provider attempt (send to answer, or to the timeout).",
    ["provider"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120),
)
provider_tokens = Counter(
    "gateway_provider_tokens",
    "Tokens the provider billed: prompt and completion of every attempt; wasted = the part of those "
    "from attempts whose answer was not used (retried or failed); cached / cache_write = the parts of "
    "prompt read from / written to the provider's prompt cache; endpoint = the surface the tokens went "
    "to (chat, embeddings, responses, messages).",
    ["provider", "team", "kind", "endpoint"],
)
provider_cost = Counter(
    "gateway_provider_cost",
    "Cost of the billed tokens (provider prices per million tokens; attempts at a provider without "
    "prices are not counted), at the provider's prices for the endpoint (embeddings have their own).",
    ["provider", "team", "endpoint"],
)
quota_wait = Histogram(
    "gateway_quota_wait_seconds",
    "Time an attempt waited locally for a bucket token, a lease and an in-flight slot, by lane.",
    ["provider", "lane"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
)
retries = Counter(
    "gateway_retries",
    "Attempts the engine decided to try again, by provider and reason (the failed attempt's error type).",
    ["provider", "reason"],
)
items = Counter(
    "gateway_items",
    "Items that reached a final state in the engine, by status and lane (batch items; interactive calls).",
    ["status", "lane"],
)
capacity_moves = Counter(
    "gateway_capacity_moves",
    "Batch items a provider took from the queue of a held-back same-priority peer of their route "
    "(routing by capacity), by provider and the provider they were queued for.",
    ["provider", "from_provider"],
)
cache_hits = Counter(
    "gateway_cache_hits",
    "Batch items answered by the response cache or by an identical item's answer (no call, nothing billed).",
    ["team"],
)
batch_duration = Histogram(
    "gateway_batch_duration_seconds",
    "Wall time of a finished batch, from start to completion.",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400),
)
engine_runs = Gauge(
    "gateway_engine_runs",
    "Engine runs (chunks) in progress, summed over live processes.",
    multiprocess_mode="livesum",
)

"""The metrics of results served outside the engine (a provider's batch API, the cache).

batches.execution.apply calls ``record_served_results`` (installed in observability.apps through
batches.execution.observers) once per committed write, for the rows it wrote that the engine did not
run: the items by final status (``gateway_items``), their prompt and completion tokens and the
prompt-cache parts of the prompt (``gateway_provider_tokens``, kinds ``cached`` / ``cache_write``) and
their cost (``gateway_provider_cost``). Results the engine ran in
real time are counted by the engine observer (observability.engine), never here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings

from gateway_engine.items import ItemResult
from providers.pricing import UNKNOWN, prices_by_provider, token_cost

from . import metrics

log = logging.getLogger(__name__)


def record_served_results(batch_id: str, team: str, results: Sequence[tuple[ItemResult, str]]) -> None:
    """Count the written results (never raises: a metrics failure is logged, the write stands)."""
    if not settings.GATEWAY_METRICS_ENABLED or not results:
        return
    try:
        _record(team, results)
    except Exception:  # noqa: BLE001 - the results are stored; only their metrics are lost
        log.exception("batch %s: metrics of %d served results not recorded", batch_id, len(results))


def _record(team: str, results: Sequence[tuple[ItemResult, str]]) -> None:
    prices = prices_by_provider()
    for result, served_by in results:
        metrics.items.labels(result.status, "batch").inc()
        if served_by == "cache":  # no call: its usage was billed once, to the call that stored it
            metrics.cache_hits.labels(team).inc()
            continue
        prompt, completion = int(result.prompt_tokens or 0), int(result.completion_tokens or 0)
        if prompt:
            metrics.provider_tokens.labels(result.provider, team, "prompt").inc(prompt)
        if completion:
            metrics.provider_tokens.labels(result.provider, team, "completion").inc(completion)
        cached, cache_write = int(result.cached_tokens or 0), int(result.cache_write_tokens or 0)
        if cached:
            metrics.provider_tokens.labels(result.provider, team, "cached").inc(cached)
        if cache_write:
            metrics.provider_tokens.labels(result.provider, team, "cache_write").inc(cache_write)
        if prompt or completion:
            cost = token_cost(
                prices.get(result.provider, UNKNOWN),
                prompt,
                completion,
                cached_tokens=cached,
                cache_write_tokens=cache_write,
            )
            if cost is not None:
                metrics.provider_cost.labels(result.provider, team).inc(float(cost))

"""ONE builder of the RESULT dict (gateway_engine.result.result_dict): an item run by the engine and
the same item stored and read back from the database give identical RESULTs (and so identical
OpenAI output/error lines)."""

from __future__ import annotations

import json
import time

import pytest

from batches.execution import apply_results, as_served
from batches.models import BatchItem, ItemStatus
from batches.selectors import iter_results, result_page
from gateway_engine import CrossProviderBatcher, EngineOptions, WorkItem
from gateway_engine.retry import RetryPolicy
from gateway_engine.routing import ProviderConfig, RouteRule, routing_table
from openai_api.conversion import split_results
from tests.factories import make_batch, work_item
from tests.servers import free_port

from .provider_server import Reply

pytestmark = pytest.mark.django_db

OWNER = "result-shape-test"


def _provider(name: str, base_url: str) -> ProviderConfig:
    return ProviderConfig.from_dict(
        {
            "name": name,
            "base_url": base_url,
            "model": f"{name}-m",
            "rpm": 60_000,
            "tpm": 10_000_000,
            "max_concurrency": 4,
            "timeout_seconds": 5,
            "max_retries": 0,
        }
    )


def _engine_results(provider_server) -> list:
    provider_server.behaviours["bad"] = lambda n, r, a, b: Reply(400)
    provider_server.behaviours["down"] = lambda n, r, a, b: Reply(503, usage={"prompt_tokens": 7})
    configs = [_provider(name, provider_server.url(name)) for name in ("ok", "bad", "down")]
    configs.append(_provider("gone", f"http://127.0.0.1:{free_port()}/v1"))
    table = routing_table(configs, [RouteRule("empty", "nowhere")])
    options = EngineOptions(retry=RetryPolicy(base_seconds=0.01, cap_seconds=0.05), seed=1)
    items = [
        work_item("ok-0", provider="ok", max_tokens=8),
        work_item("bad-0", provider="bad"),
        work_item("down-0", provider="down"),
        work_item("gone-0", provider="gone"),
        work_item("unroutable-0", route="empty"),
        WorkItem("late-0", [{"role": "user", "content": "hi"}], provider="ok", deadline=time.time() - 1),
    ]
    results = CrossProviderBatcher(table, options=options).batch(items)
    cancelled = CrossProviderBatcher(table, options=options).batch(
        [work_item("stop-0", provider="ok")], should_cancel=lambda: True
    )
    return results + cancelled


def test_engine_result_equals_the_stored_result_read_back(team, provider_server):
    results = _engine_results(provider_server)
    statuses = {r.custom_id: r.status for r in results}
    assert statuses == {
        "ok-0": "succeeded",
        "bad-0": "failed",
        "down-0": "failed",
        "gone-0": "failed",
        "unroutable-0": "failed",
        "late-0": "expired",
        "stop-0": "cancelled",
    }
    assert {r.error_type for r in results if r.status == "failed"} == {
        "client_error",
        "server_error",
        "connection_error",
        "no_provider",
    }

    batch = make_batch(team, [work_item(r.custom_id, provider="ok") for r in results])
    BatchItem.objects.filter(batch=batch).update(status=ItemStatus.RUNNING, claimed_by=OWNER)
    rows = {row.custom_id: row for row in BatchItem.objects.filter(batch=batch)}
    entries = [(rows[r.custom_id], r) for r in results]
    assert apply_results(str(batch.pk), as_served(entries), owner=OWNER).written == len(results)

    from_engine = [r.as_result() for r in results]
    page, _next = result_page(batch, limit=100)
    assert page == from_engine
    assert list(iter_results(batch)) == from_engine

    # the OpenAI output/error lines too (parsed: jsonb keeps its own key order inside "response")
    def lines(results):
        return [(ok, json.loads(line)) for ok, line in split_results(results, "batch_x")]

    assert lines(page) == lines(from_engine)


def test_the_bulk_write_keeps_every_live_counter(team):
    """The batch's live counters grow with each bulk write (before finalize recomputes them), expired
    included."""
    from gateway_engine import ItemResult

    statuses = ["succeeded", "failed", "cancelled", "expired", "expired"]
    results = [ItemResult(f"c{i}", s, provider="ok", attempts=1) for i, s in enumerate(statuses)]
    batch = make_batch(team, [work_item(r.custom_id, provider="ok") for r in results])
    BatchItem.objects.filter(batch=batch).update(status=ItemStatus.RUNNING, claimed_by=OWNER)
    rows = {row.custom_id: row for row in BatchItem.objects.filter(batch=batch)}
    entries = [(rows[r.custom_id], r) for r in results]
    assert apply_results(str(batch.pk), as_served(entries), owner=OWNER).written == 5
    batch.refresh_from_db()
    counters = (batch.completed_count, batch.failed_count, batch.cancelled_count, batch.expired_count)
    assert counters == (1, 1, 1, 2)

"""JSON logs of a batch with a failing provider, and GenAI spans of its provider calls."""

from __future__ import annotations

import io
import json
import logging

import pytest

from batches import tasks
from batches.models import Batch, BatchItem, ItemStatus
from observability import tracing
from observability.logs import GatewayJsonFormatter, RequestIdFilter, request_id_var
from tests.factories import make_batch

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_KEY = "sk-provider-secret-7f3a9c"
PROMPT_MARK = "PROMPT-BODY-Q8Z"
ANSWER_MARK = "sim"  # the simulator's answers; checked through the stored response below

SIM = {
    "providers": {
        "bad": {"median_ms": 5, "fixed_status": 500, "api_key": SECRET_KEY},
        "good": {"median_ms": 5, "completion_tokens": 3},
        "strict": {"median_ms": 5, "fixed_status": 400},
    }
}


def item(cid: str, **where) -> dict:
    return {"custom_id": cid, "query": f"{PROMPT_MARK} {cid}", "params": {"max_tokens": 3}, **where}


def make_stack(sim, make_provider, make_route):
    bad = make_provider("bad", base_url=sim.provider_url("bad"), api_key=SECRET_KEY, max_retries=0,
                        max_concurrency=2, rpm=60_000, burst_seconds=1, timeout_seconds=5)  # fmt: skip
    good = make_provider("good", base_url=sim.provider_url("good"), max_concurrency=4, rpm=60_000,
                         burst_seconds=1, timeout_seconds=5)  # fmt: skip
    make_provider("strict", base_url=sim.provider_url("strict"), max_concurrency=2, rpm=60_000,
                  burst_seconds=1, timeout_seconds=5)  # fmt: skip
    make_route("chat", bad, priority=0)
    make_route("chat", good, priority=1)


@pytest.fixture
def json_log():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(GatewayJsonFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(old_level)


def test_json_log_of_a_batch_with_a_failing_provider(
    sim_server, make_provider, make_route, team, redis_sync, json_log
):
    sim = sim_server(SIM)
    make_stack(sim, make_provider, make_route)
    items = [item(f"r{i:02d}", route="chat") for i in range(12)] + [
        item(f"s{i}", provider="strict") for i in range(3)
    ]
    batch = make_batch(team, items)
    token = request_id_var.set("req-log-42")
    try:
        tasks.start_batch.delay(str(batch.id))
    finally:
        request_id_var.reset(token)
    batch.refresh_from_db()
    assert batch.completed_at is not None

    text = json_log.getvalue()
    events = [json.loads(line) for line in text.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(e) for e in events)
    names = [e.get("event") for e in events]

    opened = [e for e in events if e.get("event") == "breaker_opened"]
    assert opened and opened[0]["provider"] == "bad" and opened[0]["level"] == "WARNING"
    assert opened[0]["to_state"] == "open"

    failed_ids = set(
        BatchItem.objects.filter(batch=batch, status=ItemStatus.FAILED).values_list("custom_id", flat=True)
    )
    assert failed_ids == {"s0", "s1", "s2"}
    failed_events = [e for e in events if e.get("event") == "item_failed"]
    assert {e["custom_id"] for e in failed_events} == failed_ids and len(failed_events) == 3
    for e in failed_events:
        assert e["level"] == "WARNING"
        assert e["batch_id"] == str(batch.id) and e["team"] == "acme" and e["provider"] == "strict"
        assert e["attempt"] == 1 and e["error_type"] == "client_error" and e["status_code"] == 400
        assert e["request_id"] == "req-log-42"

    assert names.index("batch_started") < names.index("batch_finished")
    finished = next(e for e in events if e.get("event") == "batch_finished")
    assert finished["batch_id"] == str(batch.id) and finished["request_id"] == "req-log-42"
    # no secret, no prompt, no answer body
    assert SECRET_KEY not in text
    assert PROMPT_MARK not in text
    answer = BatchItem.objects.filter(batch=batch, status=ItemStatus.SUCCEEDED).first().response
    assert json.dumps(answer["choices"][0]["message"]["content"]) not in text


def test_one_genai_span_per_provider_call_under_the_batch_span(
    sim_server, make_provider, make_route, team, redis_sync
):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sim = sim_server(SIM)
    make_stack(sim, make_provider, make_route)
    items = [item(f"r{i:02d}", route="chat") for i in range(8)] + [item("s0", provider="strict")]
    batch = make_batch(team, items)
    tracing.use_provider(provider)
    try:
        tasks.start_batch.delay(str(batch.id))
    finally:
        tracing.use_provider(None)
    counted = sim.counters()["providers"]
    spans = exporter.get_finished_spans()
    batch_spans = [s for s in spans if s.name == f"batch {batch.id}"]
    assert len(batch_spans) == 1
    root = batch_spans[0]
    calls = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(calls) == sum(counted[p]["requests"] for p in ("bad", "good", "strict"))
    by_provider = {p: [s for s in calls if s.attributes["gen_ai.provider.name"] == p] for p in counted}
    for name in ("bad", "good", "strict"):
        assert len(by_provider[name]) == counted[name]["requests"], name
    for span in calls:
        assert span.parent is not None and span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert span.attributes["gen_ai.request.model"] == f"{span.attributes['gen_ai.provider.name']}-chat"
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.start_time <= span.end_time
    ok = [s for s in by_provider["good"]]
    assert ok and all(s.attributes["gen_ai.usage.output_tokens"] == 3 for s in ok)
    assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in ok)
    assert all("error.type" not in s.attributes for s in ok)
    assert {s.attributes["error.type"] for s in by_provider["bad"]} == {"500"}
    assert {s.attributes["error.type"] for s in by_provider["strict"]} == {"400"}
    assert Batch.objects.get(id=batch.id).completed_at is not None


def test_request_id_is_echoed_or_made(client):
    given = client.get("/healthz", HTTP_X_REQUEST_ID="abc-123")
    assert given["X-Request-ID"] == "abc-123"
    bad = client.get("/healthz", HTTP_X_REQUEST_ID="no spaces; or <tags>")
    made = client.get("/healthz")
    assert len(bad["X-Request-ID"]) == 32 and bad["X-Request-ID"] != made["X-Request-ID"]


def test_secret_looking_extras_are_redacted(json_log):
    logging.getLogger("some.module").warning(
        "oops", extra={"api_key": SECRET_KEY, "messages": [PROMPT_MARK], "provider": "alpha"}
    )
    line = json.loads(json_log.getvalue().splitlines()[-1])
    assert (
        line["api_key"] == "[redacted]" and line["messages"] == "[redacted]" and line["provider"] == "alpha"
    )


def test_a_failing_observer_never_fails_an_item(sim_server, monkeypatch, caplog):
    from gateway_engine import CrossProviderBatcher
    from observability import engine, metrics

    class Broken:
        def labels(self, *args):
            raise OSError("multiprocess dir gone")

    monkeypatch.setattr(metrics, "provider_requests", Broken())
    monkeypatch.setattr(engine, "_failed_hooks", set())
    sim = sim_server({"providers": {"good": {"median_ms": 2, "completion_tokens": 2}}})
    config = {
        "providers": [{"name": "good", "base_url": sim.provider_url("good"), "model": "m", "rpm": 60_000,
                       "tpm": 10**7, "max_concurrency": 4, "burst_seconds": 1, "timeout_seconds": 5}],
        "routes": [],
    }  # fmt: skip
    batcher = CrossProviderBatcher.from_config(config, observer=engine.GatewayObserver("b1", "acme"))
    results = batcher.batch([item(f"i{i}", provider="good") for i in range(5)])
    assert [r.status for r in results] == ["succeeded"] * 5
    assert sim.counters()["providers"]["good"]["requests"] == 5
    failures = [r for r in caplog.records if "engine observer on_attempt failed" in r.getMessage()]
    assert len(failures) == 1  # logged once, not per item

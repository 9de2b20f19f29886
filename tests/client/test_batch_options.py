"""The client's batch options ``cache``, ``webhook_url`` and ``provider_batch`` end to end against the real
stack (uvicorn + a default-pool Celery worker + the simulator, tests/client/conftest.py): what the
gateway stored and did with each, and what the provider saw."""

from __future__ import annotations

import json

import pytest
from batch_gateway_client import BadRequestError, Gateway

from batches.models import Batch, BatchItem
from tests.provider_batches.helpers import KEY
from tests.provider_batches.helpers import sim_provider as batch_sim_provider
from tests.waiting import wait_until
from webhooks.models import WebhookEvent

from .conftest import sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def sent(sim, name: str) -> int:
    return sum(sim.request_counts().get(name, {}).values())


def test_cache_answers_a_repeated_batch_without_the_provider(
    stack, sim_server, make_provider, make_route, key
):
    sim, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    items = [{"custom_id": f"c{i}", "route": "chat", "query": f"same question {i}", "params": {"temperature": 0.7}}
             for i in range(3)]  # fmt: skip
    with Gateway(stack.url, key(), timeout=30) as gw:
        first = gw.batch(items, progress=False, cache=True)
        assert all(r["ok"] and r["served_by"] == "realtime" for r in first), first
        assert sent(sim, "gpt") == 3
        again = gw.batch(items, progress=False, cache=True)
        assert [r["served_by"] for r in again] == ["cache"] * 3
        assert [r["response"] for r in again] == [r["response"] for r in first]
        assert sent(sim, "gpt") == 3  # the provider saw nothing of the second batch
        off = gw.batch(items, progress=False, cache=False)
        assert [r["served_by"] for r in off] == ["realtime"] * 3 and sent(sim, "gpt") == 6
    assert [b.cache for b in Batch.objects.order_by("created_at")] == [True, True, False]


def test_webhook_url_is_stored_and_the_batch_end_makes_its_event(
    stack, sim_server, make_provider, make_route, key
):
    _, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    url = "https://hooks.example.com/client"
    with Gateway(stack.url, key(), timeout=30) as gw:
        with pytest.raises(BadRequestError) as refused:  # a private address is refused, naming the field
            gw.submit([{"route": "chat", "query": "x"}], webhook_url="https://169.254.169.254/")
        assert refused.value.fields == ["webhook_url"] and Batch.objects.count() == 0
        batch = gw.submit([{"route": "chat", "query": "x"}], webhook_url=url)
        assert batch["webhook_url"] == url
        ended = gw.wait(batch["id"])
    assert ended["status"] == "completed"
    event = wait_until(lambda: WebhookEvent.objects.filter(batch_id=batch["id"]).first(), 15,
                       what="the batch's webhook event")  # fmt: skip
    assert event.url == url and event.type == "batch.completed"
    assert json.loads(event.body)["data"]["id"] == batch["id"]


def test_provider_batch_always_goes_through_the_batch_api_or_is_refused(
    stack, sim_server, make_provider, make_route, key
):
    sim = sim_server({"time_scale": 1000, "seed": 3, "providers": {
        "bulk": batch_sim_provider(turnaround_ms=300_000), "live": {"median_ms": 5, "rpm": 100_000}}})  # fmt: skip
    bulk = make_provider("bulk", base_url=sim.kind_url("bulk", "openai"), api_key=KEY, batch_api=True,
                         rpm=6000, tpm=10**7, max_concurrency=20)  # fmt: skip
    live = make_provider("live", base_url=sim.provider_url("live"), rpm=6000, tpm=10**7, max_concurrency=20)
    make_route("bulk-route", bulk)
    make_route("live-route", live)
    items = [{"route": "bulk-route", "query": f"q{i}", "params": {"max_tokens": 4}} for i in range(3)]
    with Gateway(stack.url, key(), timeout=30) as gw:
        with pytest.raises(BadRequestError) as refused:  # "live" has no batch API
            gw.submit([{"route": "live-route", "query": "x"}], provider_batch="always")
        assert refused.value.fields == ["provider_batch"] and "live" in str(refused.value)
        assert Batch.objects.count() == 0 and BatchItem.objects.count() == 0
        results = gw.batch(items, progress=False, provider_batch="always", wait_timeout=120)
        assert all(r["ok"] for r in results), results
        assert [r["served_by"] for r in results] == ["provider_batch"] * 3
        never = gw.batch(items[:1], progress=False, provider_batch="never")
        assert never[0]["served_by"] == "realtime"
    counters = sim.counters()["providers"]
    assert counters["bulk"]["batches_created"] >= 1
    assert sent(sim, "live") == 0

"""Usage, cost and metrics by endpoint (issue #39): a batch of chat and embedding items is finalized
into one TeamUsageDaily row per (provider, endpoint), its stats say each endpoint's tokens and cost
(embeddings at the provider's embedding price), /api/v1/usage reports per endpoint, and the token and
cost metrics carry the endpoint label."""

from __future__ import annotations

import pytest
from django.test import TestCase
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from batches import execution
from batches.execution.served import Served
from batches.models import Batch, BatchItem, TeamUsageDaily
from gateway_engine import ItemResult
from observability.served import record_served_results
from providers.pricing import Prices, price_of
from teams.services import create_api_key
from tests.factories import claim, make_batch

pytestmark = pytest.mark.django_db


def _result(custom_id, prompt, completion):
    entry = {"provider": "pe", "status_code": 200, "error_type": "", "latency_ms": 5, "prompt_tokens": prompt,
             "completion_tokens": completion, "tokens": prompt + completion, "used": True, "at": "x"}  # fmt: skip
    return ItemResult(custom_id, "succeeded", provider="pe", attempts=1, latency_ms=5, response={},
                      prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                      attempt_log=[entry])  # fmt: skip


@pytest.fixture
def priced(make_provider):
    # chat: 10 per million prompt, 20 per million completion; embeddings: 1 per million input tokens
    return make_provider("pe", price_prompt_per_million="10", price_completion_per_million="20",
                         price_embedding_per_million="1")  # fmt: skip


def _finished(team, chat=(100_000, 50_000), embeddings=(2_000_000, 0)) -> Batch:
    batch = make_batch(team, [{"custom_id": c, "provider": "pe", "query": "q"} for c in ("c0", "e0")])
    BatchItem.objects.filter(custom_id="e0").update(
        endpoint="embeddings", payload={"input": "q", "params": {}}
    )
    rows = {i.custom_id: i for i in claim(str(batch.id), owner="w")}
    served = [Served(rows["c0"], _result("c0", *chat)), Served(rows["e0"], _result("e0", *embeddings))]
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert execution.apply_results(str(batch.id), served, owner="w").written == 2
    execution.finalize_batch_if_done(str(batch.id))
    batch.refresh_from_db()
    return batch


def test_embedding_tokens_are_priced_at_the_embedding_price():
    prices = {"p": Prices(prompt_per_million=10, completion_per_million=20, embedding_per_million=1)}
    assert price_of(prices, ("p", "embeddings")).prompt_per_million == 1
    assert (
        price_of(prices, ("p", "chat")).prompt_per_million == 10 == price_of(prices, "p").prompt_per_million
    )
    unpriced = {"p": Prices(prompt_per_million=10, completion_per_million=20)}
    assert price_of(unpriced, ("p", "embeddings")).prompt_per_million == 10  # empty: the prompt price


def test_stats_and_usage_rows_are_kept_per_endpoint(team, priced):
    batch = _finished(team)
    endpoints = batch.stats["endpoints"]
    assert set(endpoints) == {"chat", "embeddings"}
    emb = endpoints["embeddings"]
    assert emb["token_usage"]["prompt_tokens"] == 2_000_000 and emb["token_usage"]["completion_tokens"] == 0
    assert emb["token_usage"]["cost"] == pytest.approx(2.0)  # 2M × 1
    assert endpoints["chat"]["token_usage"]["cost"] == pytest.approx(2.0)  # 0.1M × 10 + 0.05M × 20
    assert emb["providers"]["pe"]["items_succeeded"] == 1 and emb["success_count"] == 1
    # the whole batch: the sums, each endpoint at its own price (not 2.1M prompt tokens × 10)
    assert batch.stats["token_usage"]["prompt_tokens"] == 2_100_000
    assert batch.stats["token_usage"]["cost"] == pytest.approx(4.0)
    assert batch.stats["providers"]["pe"]["cost"] == pytest.approx(4.0)
    usage = {u.endpoint: u for u in TeamUsageDaily.objects.filter(team=team, provider="pe")}
    assert set(usage) == {"chat", "embeddings"}
    assert (usage["embeddings"].requests, usage["embeddings"].items_succeeded) == (1, 1)
    assert (usage["embeddings"].prompt_tokens, usage["embeddings"].completion_tokens) == (2_000_000, 0)
    assert usage["chat"].prompt_tokens == 100_000


def test_a_second_batch_adds_to_the_same_rows(team, priced):
    _finished(team)
    _finished(team)
    usage = {u.endpoint: u.prompt_tokens for u in TeamUsageDaily.objects.filter(team=team, provider="pe")}
    assert usage == {"chat": 200_000, "embeddings": 4_000_000}


def test_the_usage_api_reports_per_endpoint(team, priced):
    _finished(team)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 't')[1]}")
    data = client.get("/api/v1/usage", {"group_by": "endpoint"}).json()
    rows = {r["endpoint"]: r for r in data["results"]}
    assert (
        rows["embeddings"]["prompt_tokens"] == 2_000_000 and rows["embeddings"]["total_tokens"] == 2_000_000
    )
    assert rows["embeddings"]["cost"] == pytest.approx(2.0) and rows["chat"]["cost"] == pytest.approx(2.0)
    assert data["totals"]["cost"] == pytest.approx(4.0)
    by_day = client.get("/api/v1/usage").json()  # the default grouping: endpoints beside it
    assert by_day["group_by"] == "day" and by_day["results"][0]["cost"] == pytest.approx(4.0)
    assert by_day["endpoints"]["embeddings"]["cost"] == pytest.approx(2.0)
    assert by_day["endpoints"]["chat"]["prompt_tokens"] == 100_000
    by_provider = client.get("/api/v1/usage", {"group_by": "provider"}).json()
    assert by_provider["results"][0]["provider"] == "pe" and by_provider["results"][0][
        "cost"
    ] == pytest.approx(4.0)
    assert client.get("/api/v1/usage", {"group_by": "model"}).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_served_results_count_tokens_and_cost_per_endpoint(team, priced):
    def sample(name, **labels):
        return REGISTRY.get_sample_value(name, {"provider": "pe", "team": team.name, **labels}) or 0.0

    labels = {"kind": "prompt", "endpoint": "embeddings"}
    before = (
        sample("gateway_provider_tokens_total", **labels),
        sample("gateway_provider_cost_total", endpoint="embeddings"),
    )
    record_served_results("b", team.name, [(_result("e0", 3_000_000, 0), "provider_batch", "embeddings")])
    assert sample("gateway_provider_tokens_total", **labels) - before[0] == 3_000_000
    assert sample("gateway_provider_cost_total", endpoint="embeddings") - before[1] == pytest.approx(3.0)


def test_the_pages_show_each_endpoint(team, priced, client):
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    batch = _finished(team)
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123456"))
    page = client.get(reverse("dashboard:batch_detail", args=[batch.pk])).content.decode()
    assert "embeddings: prompt 2,000,000 · completion 0 tokens · cost 2.0000" in page
    assert "chat: prompt 100,000 · completion 50,000 tokens · cost 2.0000" in page
    usage = client.get(reverse("dashboard:usage")).content.decode()
    assert "<th>Endpoint</th>" in usage and "<td>embeddings</td>" in usage

"""The results of kinds other than OpenAI (#21), end to end on real PostgreSQL and Redis: an answer with
its native form and prompt-cache counts goes through the one result writer (batches.execution.apply)
and shows as stored — ``?include=native`` (JSON pages and JSONL; anything else a 400 naming
``include``), ``usage.prompt_tokens_details``, /v1 output lines that stay OpenAI-valid — and in the
batch stats, the daily usage, the usage API, the usage CSV, the token metrics and the costs."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client
from prometheus_client import generate_latest
from rest_framework.test import APIClient

from batches.execution import ServedBy, apply_results, as_served
from batches.execution.finalize import finalize_batch_if_done
from batches.models import Batch, BatchItem, TeamUsageDaily
from batches.selectors import iter_results
from gateway_engine import ItemResult
from observability.served import record_served_results
from observability.views import metrics_registry
from openai_api.conversion import split_results
from teams.services import create_api_key
from tests.factories import claim, login_superuser, make_batch
from tests.factories import work_item as q
from tests.observability.helpers import samples, value

pytestmark = pytest.mark.django_db

OWNER = "native-writer"
# an Anthropic Messages answer (https://docs.anthropic.com/en/api/messages, "Response" example) and
# its OpenAI translation as the wire format gives it
NATIVE = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "Hi! My name is Claude."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 20_000,
        "cache_creation_input_tokens": 20_000,
        "cache_read_input_tokens": 60_000,
        "output_tokens": 10_000,
    },
}
CHAT = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "object": "chat.completion",
    "model": "claude-x",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi! My name is Claude."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 100_000, "completion_tokens": 10_000, "total_tokens": 110_000},
}


def result(
    custom_id: str, provider: str, native, prompt: int, completion: int, cached, written
) -> ItemResult:
    attempt = {
        "provider": provider,
        "status_code": 200,
        "error_type": "",
        "latency_ms": 5,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "tokens": prompt + completion,
        "used": True,
        "at": "2026-12-01T12:00:00+00:00",
    }
    return ItemResult(
        custom_id,
        "succeeded",
        provider=provider,
        attempts=1,
        latency_ms=5,
        response=CHAT if native else {"object": "chat.completion", "choices": []},
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        attempt_log=[attempt],
        native_response=native,
        cached_tokens=cached,
        cache_write_tokens=written,
    )


@pytest.fixture
def api(team):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'native')[1]}")
    return c


@pytest.fixture
def served(team, make_provider):
    """A finished batch: item "c" answered by claude (anthropic, with cached reads and cache writes),
    item "g" by gpt (openai, no cache counts), written by the one result writer, then finalized as the
    writer's accounting does for results served outside the engine (called here directly: the budget
    ledger's re-seed closes the thread's connection, and with it this test's transaction)."""
    prices = dict(price_prompt_per_million=Decimal(3), price_completion_per_million=Decimal(15))
    make_provider(
        "claude",
        kind="anthropic",
        price_cached_prompt_per_million=Decimal("0.3"),
        price_cache_write_per_million=Decimal("3.75"),
        **prices,
    )
    make_provider("gpt", **prices)
    batch = make_batch(team, [q("c", provider="claude"), q("g", provider="gpt")])
    items = {i.custom_id: i for i in claim(str(batch.id), owner=OWNER)}
    answers = [
        (items["c"], result("c", "claude", NATIVE, 100_000, 10_000, 60_000, 20_000)),
        (items["g"], result("g", "gpt", None, 5, 5, None, None)),
    ]
    assert apply_results(str(batch.id), as_served(answers), OWNER).written == 2
    assert finalize_batch_if_done(str(batch.id))
    return batch, answers


def test_the_writer_stores_the_native_answer_and_the_cache_counts(served):
    batch, _ = served
    rows = {r.custom_id: r for r in BatchItem.objects.filter(batch=batch)}
    c, g = rows["c"], rows["g"]
    assert (c.response, c.native_response, c.cached_tokens, c.cache_write_tokens) == (
        CHAT,
        NATIVE,
        60_000,
        20_000,
    )
    assert (g.native_response, g.cached_tokens, g.cache_write_tokens) == (None, None, None)


def test_results_show_the_native_answer_only_when_asked(api, served):
    batch, _ = served
    url = f"/api/v1/batches/{batch.id}/results"
    plain = {r["custom_id"]: r for r in api.get(url).json()["results"]}
    assert all("native_response" not in r for r in plain.values())
    assert plain["c"]["response"] == CHAT  # the OpenAI shape, whatever the kind
    assert plain["c"]["usage"] == {
        "prompt_tokens": 100_000,
        "completion_tokens": 10_000,
        "total_tokens": 110_000,
        "prompt_tokens_details": {"cached_tokens": 60_000, "x_gateway_cache_write_tokens": 20_000},
    }
    assert plain["g"]["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}

    native = {r["custom_id"]: r for r in api.get(url, {"include": "native"}).json()["results"]}
    assert native["c"]["native_response"] == NATIVE and native["g"]["native_response"] is None
    assert {k: v for k, v in native["c"].items() if k != "native_response"} == plain["c"]

    streamed = api.get(url, {"format": "jsonl", "include": "native"})
    assert streamed["Content-Type"] == "application/jsonl"
    lines = [json.loads(x) for x in b"".join(streamed.streaming_content).decode().splitlines()]
    assert [(x["custom_id"], x["native_response"]) for x in lines] == [("c", NATIVE), ("g", None)]
    bare = b"".join(api.get(url, {"format": "jsonl"}).streaming_content).decode()
    assert "native_response" not in bare and "cache_read_input_tokens" not in bare


@pytest.mark.parametrize("query", [{"include": "natve"}, {"include": "native,raw"}, {"include": " , "},
                                   {"include": "x", "format": "jsonl"}])  # fmt: skip
def test_anything_else_in_include_is_a_400_naming_it(api, served, query):
    batch, _ = served
    response = api.get(f"/api/v1/batches/{batch.id}/results", query)
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "include" and "native" in error["message"]


def test_v1_output_lines_stay_openai_valid(served):
    batch, _ = served
    lines = [json.loads(line) for ok, line in split_results(iter_results(batch), "batch_x") if ok]
    bodies = {line["custom_id"]: line["response"]["body"] for line in lines}
    assert bodies["c"] == CHAT  # never the native answer
    assert "native_response" not in json.dumps(lines)


def test_stats_usage_csv_and_cost_count_the_cache(team, api, served):
    batch, _ = served
    batch = Batch.objects.get(pk=batch.pk)
    assert batch.completed_at is not None
    claude, usage = batch.stats["providers"]["claude"], batch.stats["token_usage"]
    assert (claude["cached_tokens"], claude["cache_write_tokens"]) == (60_000, 20_000)
    assert (batch.stats["providers"]["gpt"]["cached_tokens"], usage["cached_tokens"]) == (0, 60_000)
    assert usage["cache_write_tokens"] == 20_000
    # 20k uncached × 3 + 60k cached × 0.3 + 20k written × 3.75 + 10k completion × 15, per million
    assert claude["cost"] == pytest.approx(0.303)
    assert usage["cost"] == pytest.approx(0.303 + 5 * 3e-6 + 5 * 15e-6)  # + gpt's

    daily = TeamUsageDaily.objects.get(team=team, provider="claude")
    assert (daily.prompt_tokens, daily.cached_tokens, daily.cache_write_tokens) == (100_000, 60_000, 20_000)

    by_provider = {
        r["provider"]: r for r in api.get("/api/v1/usage", {"group_by": "provider"}).json()["results"]
    }
    assert (by_provider["claude"]["cached_tokens"], by_provider["claude"]["cache_write_tokens"]) == (
        60_000,
        20_000,
    )
    assert by_provider["claude"]["cost"] == pytest.approx(0.303)
    assert by_provider["claude"]["prompt_tokens"] == 100_000  # all input, as before
    totals = api.get("/api/v1/usage").json()["totals"]
    assert (totals["cached_tokens"], totals["cache_write_tokens"]) == (60_000, 20_000)

    browser = login_superuser(Client())
    day = daily.day.isoformat()
    csv_text = b"".join(
        browser.get("/dashboard/usage.csv", {"date_from": day, "date_to": day}).streaming_content
    ).decode()
    header, *rows = [line.split(",") for line in csv_text.strip().splitlines()]
    line = dict(zip(header, next(r for r in rows if r[2] == "claude"), strict=True))
    assert (line["cached_tokens"], line["cache_write_tokens"], line["cost"]) == ("60000", "20000", "0.303000")


def measured() -> dict:
    return samples(generate_latest(metrics_registry()).decode())


@pytest.mark.django_db(transaction=True)  # the metrics registry's live collectors use their own connections
def test_token_metrics_count_the_cache(team, served):
    batch, answers = served
    before = measured()
    # served outside the engine (a provider's batch API): the writer records their tokens (a response-cache
    # hit would record none: docs/cache.md)
    record_served_results(
        str(batch.id), team.name, [(r, ServedBy.PROVIDER_BATCH, "chat") for _, r in answers]
    )
    after = measured()
    for provider, kind, n in (
        ("claude", "cached", 60_000),
        ("claude", "cache_write", 20_000),
        ("claude", "prompt", 100_000),
        ("gpt", "cached", 0),
    ):
        name, labels = "gateway_provider_tokens_total", {"provider": provider, "kind": kind}
        assert value(after, name, **labels) - value(before, name, **labels) == n
    cost = "gateway_provider_cost_total"
    assert value(after, cost, provider="claude") - value(before, cost, provider="claude") == pytest.approx(
        0.303
    )


def test_the_v1_batch_object_reports_the_cached_input(team, served):
    from openai_api.models import OpenAIBatch
    from openai_api.selectors import batch_object

    batch, _ = served
    ob = OpenAIBatch.objects.create(
        id=f"batch_{batch.id.hex}", team=team, batch=Batch.objects.get(pk=batch.pk)
    )
    usage = batch_object(ob)["usage"]
    assert usage["input_tokens"] == 100_005 and usage["input_tokens_details"] == {"cached_tokens": 60_000}


def test_the_dashboard_item_page_shows_the_providers_own_answer(served):
    batch, _ = served
    browser = login_superuser(Client())
    rows = {r.custom_id: r for r in BatchItem.objects.filter(batch=batch)}
    page = browser.get(f"/dashboard/items/{rows['c'].pk}/").content.decode()
    assert "Provider's own answer" in page and "cache_read_input_tokens" in page
    plain = browser.get(f"/dashboard/items/{rows['g'].pk}/").content.decode()
    assert "own answer" not in plain

"""POST /api/v1/batches with embedding items (issue #39): ``"endpoint": "embeddings"`` + ``input`` is
stored with its endpoint and input (never half-stored), routed like a chat item, kept off the
provider-batch route and out of prefix groups (their cache keys: tests/cache/test_embedding_keys.py); a bad item refuses the whole batch naming its field."""

from __future__ import annotations

import pytest

from batches.models import Batch, BatchItem, ServedVia
from providers.models import Provider

from .helpers import post_json, post_jsonl

pytestmark = pytest.mark.django_db


def embedding(i: int, text="chunk", **extra) -> dict:
    return {"custom_id": f"e{i}", "route": "intent", "endpoint": "embeddings", "input": text, **extra}


def test_embedding_items_are_stored_with_their_endpoint_and_input(client, routes):
    Provider.objects.filter(name="alpha").update(batch_api=True)  # chat items may take its batch API
    body = {
        "items": [
            embedding(0, "one chunk"),
            embedding(1, ["a", "b", "c"], params={"dimensions": 256}),
            {"custom_id": "chat", "route": "intent", "query": "hi"},
        ],
        "provider_batch": "auto",
        "completion_window": "24h",
    }
    response = post_json(client, body)
    assert response.status_code == 201, response.content
    rows = {i.custom_id: i for i in BatchItem.objects.all()}
    assert rows["e0"].endpoint == "embeddings" and rows["e0"].payload == {"input": "one chunk", "params": {}}
    assert rows["e1"].payload == {"input": ["a", "b", "c"], "params": {"dimensions": 256}}
    assert rows["chat"].endpoint == "chat" and rows["chat"].payload["messages"][0]["content"] == "hi"
    assert "input" not in rows["chat"].payload
    assert {r.queue_provider for r in rows.values()} == {"alpha"}  # routed like any item
    # OpenAI's Batch API takes embeddings lines too (kinds.BatchApi.endpoints): both go there
    assert rows["chat"].served_via == ServedVia.PROVIDER_BATCH
    assert rows["e0"].served_via == rows["e1"].served_via == ServedVia.PROVIDER_BATCH
    assert rows["e0"].prefix_key == ""


def test_jsonl_embedding_items_are_stored_too(client, routes):
    response = post_jsonl(client, [embedding(i, f"chunk {i}") for i in range(5)])
    assert response.status_code == 201, response.content
    assert sorted(BatchItem.objects.values_list("endpoint", flat=True)) == ["embeddings"] * 5
    assert BatchItem.objects.get(custom_id="e3").payload["input"] == "chunk 3"


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (embedding(1, ""), "input"),
        (embedding(1, []), "input"),
        (embedding(1, ["ok", ""]), "input"),
        ({**embedding(1), "query": "also"}, "query"),
        ({**embedding(1), "endpoint": "images"}, "endpoint"),
        ({"custom_id": "e1", "route": "intent", "input": "no endpoint"}, "input"),
    ],
)
def test_a_bad_embedding_item_refuses_the_batch_naming_its_field(client, routes, bad, field):
    response = post_json(client, {"items": [embedding(0), bad]})
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(1, field)], errors
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_provider_batch_always_takes_embedding_items_where_the_batch_api_takes_embeddings_lines(
    client, routes
):
    response = post_json(client, {"items": [embedding(0)], "provider_batch": "always"})
    assert response.status_code == 400  # alpha and beta have no batch API
    error = response.json()["errors"][0]
    assert error["field"] == "provider_batch" and "alpha" in error["message"] and "beta" in error["message"]
    assert not Batch.objects.exists()
    Provider.objects.filter(name__in=["alpha", "beta"]).update(
        batch_api=True
    )  # kind openai: embeddings lines
    response = post_json(client, {"items": [embedding(0)], "provider_batch": "always"})
    assert response.status_code == 201, response.content
    assert BatchItem.objects.get().served_via == ServedVia.PROVIDER_BATCH

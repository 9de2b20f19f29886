"""Bad embedding items over the REST API with Provider rows of real kinds in PostgreSQL (issue #39, "bad
input"): an empty input, an input over the provider's limit and a kind without embeddings are each
refused at submission naming the field (and the provider), and nothing is stored."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem
from teams.services import create_api_key

pytestmark = pytest.mark.django_db

URL = "/api/v1/batches"


@pytest.fixture
def routes(make_provider, make_route):
    make_route("embed", make_provider("gpt", model="text-embedding-3-small", tpm=10**9))
    make_route(
        "gem", make_provider("gem", kind="gemini", base_url="http://127.0.0.1:9/gem/v1beta", tpm=10**9)
    )
    make_route("claude", make_provider("claude", kind="anthropic", base_url="http://127.0.0.1:9/claude/v1"))


@pytest.fixture
def client(team):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'e')[1]}")
    return c


def emb(cid: str, route: str, text) -> dict:
    return {"custom_id": cid, "route": route, "endpoint": "embeddings", "input": text}


def test_bad_embedding_items_are_refused_naming_the_field_and_nothing_is_stored(client, routes):
    items = [
        emb("ok", "embed", ["fine", "also fine"]),
        emb("empty", "embed", ""),
        emb("long", "embed", ["ok", "x" * (8193 * 4)]),
        emb("many", "gem", ["x"] * 101),
        emb("kind", "claude", "x"),
        {"custom_id": "chat-input", "route": "embed", "query": "q", "input": "x"},
    ]
    response = client.generic("POST", URL, json.dumps({"items": items}), content_type="application/json")
    assert response.status_code == 400, response.content
    errors = [(e["index"], e["field"], e["message"]) for e in response.json()["errors"]]
    assert [(i, f) for i, f, _ in errors] == [
        (1, "input"),
        (2, "input[1]"),
        (3, "input"),
        (4, "route"),
        (5, "input"),
    ]
    assert (
        errors[1][2] == "about 8193 tokens, more than the 8192 of one input for provider 'gpt' (kind openai)"
    )
    assert errors[2][2] == "101 inputs, more than the 100 of one request for provider 'gem' (kind gemini)"
    assert "provider 'claude' (kind anthropic) serves no embeddings" in errors[3][2]
    assert (Batch.objects.count(), BatchItem.objects.count()) == (0, 0)

"""An item no reachable provider's token buckets can ever hold is refused at submission on every surface
(docs/api.md: 400 naming the field, nothing stored), as the interactive lane refuses such a call up
front, instead of being stored and failing later ``quota_impossible`` with 0 attempts.

The case is the shipped examples' ``claude`` (examples/providers.json before the fix): kind anthropic,
``otpm`` 80,000 and ``burst_seconds`` 1 → an OTPM bucket of 80,000 / 60 × (1 − 0.25 margin) = 1,000
tokens, less than the default 1,024 output tokens (GATEWAY_DEFAULT_MAX_TOKENS)."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch, BatchItem
from gateway_engine.items import estimate_split
from gateway_engine.quota.token_ask import TokenAsk
from gateway_engine.routing import ProviderConfig

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
ITEM = {"custom_id": "s1", "route": "sentiment", "query": "Hi"}


@pytest.fixture
def client(api_key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


@pytest.fixture
def claude_only(make_provider, make_route, monkeypatch):
    """Route 'sentiment' → only the examples' old claude; batches are stored but never started."""
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)
    claude = make_provider("claude", kind="anthropic", rpm=600, tpm=1_000_000, itpm=400_000, otpm=80_000,
                           burst_seconds=1.0)  # fmt: skip
    make_route("sentiment", claude)
    return claude


def _assert_refused(response, field="params.max_tokens"):
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(0, field)]
    assert "quota_impossible" in errors[0]["message"] and "OTPM" in errors[0]["message"]
    assert "'claude'" in errors[0]["message"] or "claude" in errors[0]["message"]
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_rest_json_refuses_an_item_no_bucket_can_hold(client, claude_only):
    response = client.post("/api/v1/batches", {"items": [ITEM]}, format="json")
    _assert_refused(response)


def test_rest_jsonl_refuses_an_item_no_bucket_can_hold(client, claude_only):
    body = json.dumps(ITEM) + "\n"
    response = client.generic("POST", "/api/v1/batches", body, content_type="application/jsonl")
    _assert_refused(response)


def test_v1_batches_refuses_the_line(client, claude_only):
    line = {"custom_id": "s1", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "sentiment", "messages": [{"role": "user", "content": "Hi"}]}}  # fmt: skip
    data = (json.dumps(line) + "\n").encode()
    upload = client.post("/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"},
                         format="multipart")  # fmt: skip
    assert upload.status_code == 200, upload.content
    body = {
        "input_file_id": upload.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    response = client.post("/v1/batches", body, format="json")
    # as OpenAI answers a file with invalid lines: the batch is "failed" with per-line errors
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "failed"
    [error] = response.json()["errors"]["data"]
    assert (error["line"], error["param"]) == (1, "body.max_tokens") and "quota_impossible" in error[
        "message"
    ]
    assert not Batch.objects.exists()  # no native batch, nothing queued


def test_submit_batch_command_refuses_it(tmp_path, team, claude_only):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(ITEM) + "\n")
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("submit_batch", str(path), "--team", team.name, stdout=io.StringIO(), stderr=err)
    assert "params.max_tokens" in err.getvalue() and "quota_impossible" in err.getvalue()
    assert not Batch.objects.exists()


def test_a_small_enough_max_tokens_or_a_fallback_that_holds_it_is_accepted(
    client, claude_only, make_provider, make_route
):
    small = {**ITEM, "params": {"max_tokens": 16}}
    assert client.post("/api/v1/batches", {"items": [small]}, format="json").status_code == 201
    make_route("sentiment", make_provider("gpt", tpm=1_000_000, rpm=600, burst_seconds=1.0), priority=1)
    assert client.post("/api/v1/batches", {"items": [ITEM]}, format="json").status_code == 201


def test_an_input_bucket_too_small_names_messages(client, claude_only):
    item = {**ITEM, "query": "x" * 40_000, "params": {"max_tokens": 16}}  # ~10,000 input tokens > ITPM 5,000
    response = client.post("/api/v1/batches", {"items": [item]}, format="json")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["messages"]


def test_every_example_provider_holds_a_default_item(settings):
    """examples/providers.json as shipped: an item without max_tokens fits every provider's buckets
    (the docs' claude examples send none)."""
    providers = json.loads((ROOT / "examples" / "providers.json").read_text())["providers"]
    margin = float(settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS)
    for entry in providers:
        config = ProviderConfig.from_dict(entry)
        limits = replace(config.limits, margin_seconds=min(margin, config.limits.burst_seconds / 2))
        est_input, est_output = estimate_split(
            [{"role": "user", "content": "Hi"}], {}, settings.GATEWAY_DEFAULT_MAX_TOKENS
        )
        TokenAsk(est_input + est_output, est_input, est_output).amounts(limits)  # QuotaImpossible if not

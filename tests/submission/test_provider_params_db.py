"""Submission refuses params a reachable provider cannot take, over the REST API and the /v1 input
files, with Provider rows of real kinds in PostgreSQL: the field and the provider named, nothing
stored, and the providers read once per submission whatever its size (#21)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem
from batches.submission import submit_batch
from openai_api.models import OpenAIBatch
from teams.services import create_api_key

pytestmark = pytest.mark.django_db

URL = "/api/v1/batches"


@pytest.fixture
def mixed(make_provider, make_route):
    """Route 'mixed': gpt (openai) first, claude (anthropic) as its fallback; route 'plain': gpt only."""
    gpt = make_provider("gpt")
    claude = make_provider("claude", kind="anthropic", base_url="http://127.0.0.1:9/anthropic/v1")
    make_route("mixed", gpt)
    make_route("mixed", claude, priority=1)
    make_route("plain", gpt)
    return gpt, claude


@pytest.fixture
def client(team):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'p')[1]}")
    return c


def item(cid: str, route: str = "mixed", **params) -> dict:
    return {"custom_id": cid, "route": route, "query": "hi", "params": params}


def stored() -> tuple[int, int]:
    return Batch.objects.count(), BatchItem.objects.count()


def test_json_body_refused_per_item_and_field_naming_the_provider_nothing_stored(client, mixed):
    body = {"items": [item("a", temperature=0.2), item("b", temperature=1.5), item("c", top_k=5)]}
    response = client.generic("POST", URL, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {
        "errors": [
            {
                "index": 1,
                "field": "params.temperature",
                "message": "1.5 is above 1 for provider 'claude' (kind anthropic)",
            },
            {
                "index": 2,
                "field": "params.top_k",
                "message": "not taken by provider 'claude' (kind anthropic)",
            },
        ],
        "error_count": 2,
    }
    assert stored() == (0, 0)
    # the same values on a route that reaches only the OpenAI provider are taken
    plain = {"items": [item("b", "plain", temperature=1.5), item("c", "plain", top_k=5)]}
    accepted = client.generic("POST", URL, json.dumps(plain), content_type="application/json")
    assert accepted.status_code == 201, accepted.content
    assert stored() == (1, 2)


def test_jsonl_body_names_the_line(client, mixed):
    lines = [item("a"), {}, item("b", temperature=3)]
    text = "\n".join("" if not x else json.dumps(x) for x in lines) + "\n"
    response = client.generic("POST", URL, text, content_type="application/jsonl")
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert (error["index"], error["field"], error["line"]) == (1, "params.temperature", 3)
    assert error["message"] == "line 3: 3 is above 1 for provider 'claude' (kind anthropic)"
    assert stored() == (0, 0)


def test_an_explicit_disabled_or_reenabled_provider(client, mixed):
    _gpt, claude = mixed
    body = {"items": [{"custom_id": "x", "provider": "claude", "query": "hi", "params": {"temperature": 2}}]}
    refused = client.generic("POST", URL, json.dumps(body), content_type="application/json")
    assert refused.json()["errors"][0]["field"] == "params.temperature"
    claude.enabled = False
    claude.save()
    # disabled: not reachable by the route any more, so the route's items are taken …
    route_body = {"items": [item("y", temperature=2)]}
    assert (
        client.generic("POST", URL, json.dumps(route_body), content_type="application/json").status_code
        == 201
    )
    # … and naming it directly says it is disabled (the existing rule), not a param problem
    again = client.generic("POST", URL, json.dumps(body), content_type="application/json").json()
    assert again["errors"] == [{"index": 0, "field": "provider", "message": "provider 'claude' is disabled"}]


def test_the_providers_are_read_once_per_submission_whatever_its_size(team, mixed):
    def queries(n: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            submit_batch(team=team, items=[item(f"{n}-{i}", temperature=0.5) for i in range(n)])
        return len(captured.captured_queries)

    assert queries(5) == queries(2000)
    assert BatchItem.objects.count() == 2005


# --- /v1 input files ---------------------------------------------------------------------------------


def request_line(custom_id: str, model: str, **body) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": "hi"}], **body},
    }


def test_v1_input_lines_refused_with_the_openai_error_shape(client, mixed, files_root):
    data = "".join(
        json.dumps(x) + "\n"
        for x in (
            request_line("ok", "mixed", temperature=0.5),
            request_line("hot", "mixed", temperature=1.5),
            request_line("k", "claude", top_k=2),
            request_line("fine", "plain", top_k=2),
        )
    ).encode()
    upload = client.post(
        "/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"}, format="multipart"
    )
    assert upload.status_code == 200, upload.content
    created = client.post(
        "/v1/batches",
        {
            "input_file_id": upload.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
        format="json",
    ).json()
    assert created["status"] == "failed"
    assert created["errors"]["data"] == [
        {
            "code": "invalid_request",
            "message": "1.5 is above 1 for provider 'claude' (kind anthropic)",
            "param": "body.temperature",
            "line": 2,
        },
        {
            "code": "invalid_request",
            "message": "not taken by provider 'claude' (kind anthropic)",
            "param": "body.top_k",
            "line": 3,
        },
    ]
    assert stored() == (0, 0)  # nothing runs
    assert OpenAIBatch.objects.get(id=created["id"]).batch is None


@pytest.fixture
def files_root(tmp_path, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "openai_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    return tmp_path / "files"

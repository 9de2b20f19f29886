"""Per-team limits on queued work (issue #29): a team at a limit gets 429 naming it, with Retry-After,
in each surface's error shape, and nothing is stored, while another team's submissions still succeed.
Before: one key could queue 50,000-item batches back to back (only budgets, off by default, limited)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch, BatchItem
from teams.models import Team
from teams.services import create_api_key

pytestmark = pytest.mark.django_db

URL = "/api/v1/batches"


@pytest.fixture(autouse=True)
def held(monkeypatch):
    """Batches are stored, not started: the queue only grows."""
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)


@pytest.fixture
def setup(make_provider, make_route, team, other_team):
    make_route("intent", make_provider("alpha"))

    def client_of(t: Team) -> APIClient:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(t, 'limits')[1]}")
        return c

    return client_of(team), client_of(other_team)


def post(client, n: int, start: int = 0):
    items = [{"custom_id": f"c{start + i}", "route": "intent", "query": "q"} for i in range(n)]
    return client.generic("POST", URL, json.dumps({"items": items}), content_type="application/json")


def test_a_team_at_its_pending_items_limit_gets_429_and_another_team_does_not(setup, team, other_team):
    mine, theirs = setup
    team.max_pending_items = 10
    team.save()
    assert post(mine, 6).status_code == 201
    stored = (Batch.objects.count(), BatchItem.objects.count())
    refused = post(mine, 5, start=100)  # 6 + 5 > 10
    assert refused.status_code == 429
    assert refused["Retry-After"] == "60"
    body = refused.json()
    assert body["limit"] == "pending_items" and body["errors"][0]["field"] == "limits.pending_items"
    assert "6 items not finished yet" in body["errors"][0]["message"]
    assert (Batch.objects.count(), BatchItem.objects.count()) == stored  # nothing half-stored
    assert post(mine, 4, start=200).status_code == 201  # exactly up to the limit
    assert post(theirs, 50).status_code == 201  # the other team is untouched
    usage = mine.get("/api/v1/usage").json()["queue"]
    assert usage["pending_items"] == 10 and usage["max_pending_items"] == 10


def test_open_batches_and_submissions_per_minute(setup, team, settings):
    mine, _ = setup
    team.max_open_batches = 2
    team.save()
    assert [post(mine, 1, start=i).status_code for i in range(3)] == [201, 201, 429]
    assert post(mine, 1).json()["limit"] == "open_batches"
    team.max_open_batches = None  # back to the deployment default
    team.save()
    settings.GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE = 3
    codes = [post(mine, 1, start=10 + i).status_code for i in range(2)]
    assert codes == [201, 429]  # 2 earlier + 1 = 3 in the last minute
    refused = post(mine, 1)
    assert refused.json()["limit"] == "submissions_per_minute" and refused["Retry-After"] == "60"


def test_the_openai_surface_answers_429_in_its_own_shape(setup, team):
    mine, _ = setup
    team.max_pending_items = 1
    team.save()
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "intent", "messages": [{"role": "user", "content": "hi"}]}}
        for i in range(2)
    ]  # fmt: skip
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    upload = mine.post(
        "/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"}, format="multipart"
    )
    assert upload.status_code == 200, upload.content
    body = {
        "input_file_id": upload.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    before = Batch.objects.count()
    refused = mine.post("/v1/batches", body, format="json")
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    error = refused.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "rate_limit_error",
        "queue_limit_exceeded",
        "limits.pending_items",
    )
    assert Batch.objects.count() == before

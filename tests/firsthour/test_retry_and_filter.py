"""GET …/results?status= and POST …/retry_failed (re-run a finished batch's failed items as a new batch)."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from batches.models import Batch, BatchItem
from batches.submission import BatchOptions, submit_batch
from providers.models import RoutingRule

pytestmark = pytest.mark.django_db

STATES = ["succeeded", "failed", "cancelled", "failed", "succeeded", "expired", "failed"]


@pytest.fixture
def finished(team, routes):
    """A finished batch whose items ended in STATES (item i: custom_id c<i>)."""
    items = []
    for i in range(len(STATES)):
        item = {"custom_id": f"c{i}", "messages": [{"role": "user", "content": f"q{i}"}]}
        if i % 2:
            item["provider"] = "beta"
            item["params"] = {"max_tokens": 7 + i, "temperature": 0.5}
        else:
            item["route"] = "intent"
        items.append(item)
    batch = submit_batch(
        team=team,
        items=items,
        metadata={"source": "nightly"},
        options=BatchOptions(priority="high", completion_window="1h"),
    )
    for i, state in enumerate(STATES):
        BatchItem.objects.filter(batch=batch, seq=i).update(
            status=state, error_type="server_error" if state == "failed" else ""
        )
    Batch.objects.filter(pk=batch.pk).update(status="completed", completed_at=timezone.now())
    batch.refresh_from_db()
    return batch


def _ids(results):
    return [r["custom_id"] for r in results]


def test_results_filtered_by_one_status_paged_in_order(client, finished):
    url = f"/api/v1/batches/{finished.id}/results"
    page = client.get(url, {"status": "failed", "limit": 2}).json()
    assert _ids(page["results"]) == ["c1", "c3"]
    assert all(r["status"] == "failed" and r["ok"] is False for r in page["results"])
    assert "status=failed" in page["next"]
    rest = client.get(page["next"]).json()
    assert _ids(rest["results"]) == ["c6"] and rest["next"] is None


def test_results_filtered_by_several_statuses_and_streamed(client, finished):
    url = f"/api/v1/batches/{finished.id}/results"
    both = client.get(url, {"status": "cancelled,expired"}).json()
    assert _ids(both["results"]) == ["c2", "c5"]
    streamed = client.get(url, {"status": "succeeded", "format": "jsonl"})
    lines = [json.loads(x) for x in b"".join(streamed.streaming_content).decode().splitlines()]
    assert _ids(lines) == ["c0", "c4"]
    assert len(client.get(url).json()["results"]) == len(STATES)  # no filter: everything
    assert len(client.get(url, {"status": ""}).json()["results"]) == len(STATES)  # empty = no filter


@pytest.mark.parametrize("value", ["done", "failed,done", ",", "FAILED"])
def test_results_bad_status_is_400_naming_the_field(client, finished, value):
    response = client.get(f"/api/v1/batches/{finished.id}/results", {"status": value})
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "status" and "failed" in error["message"]


def test_retry_failed_submits_exactly_the_failed_items_as_a_new_batch(client, finished):
    before = Batch.objects.count()
    response = client.post(f"/api/v1/batches/{finished.id}/retry_failed")
    assert response.status_code == 201, response.content
    new = response.json()
    assert new["id"] != str(finished.id) and new["status"] == "queued"
    assert new["request_counts"]["total"] == 3
    assert new["metadata"] == {"source": "nightly", "retry_of": str(finished.id)}
    assert new["priority"] == "high" and new["completion_window"] == "1h"
    assert Batch.objects.count() == before + 1
    items = list(BatchItem.objects.filter(batch_id=new["id"]).order_by("seq"))
    assert [i.custom_id for i in items] == ["c1", "c3", "c6"]
    originals = {i.custom_id: i for i in BatchItem.objects.filter(batch=finished)}
    for item in items:
        original = originals[item.custom_id]
        assert item.status == "pending"
        assert (item.route, item.requested_provider) == (original.route, original.requested_provider)
        assert item.payload == original.payload
    assert items[0].requested_provider == "beta" and items[0].payload["params"]["max_tokens"] == 8
    assert items[2].route == "intent"


def test_retry_failed_twice_is_409_naming_the_first_retry(client, finished):
    first = client.post(f"/api/v1/batches/{finished.id}/retry_failed").json()
    again = client.post(f"/api/v1/batches/{finished.id}/retry_failed")
    assert again.status_code == 409
    assert again.json()["retry_batch_id"] == first["id"] and first["id"] in again.json()["detail"]
    assert Batch.objects.filter(metadata__retry_of=str(finished.id)).count() == 1


def test_retry_failed_of_a_running_batch_or_one_without_failures_is_409(client, finished, team, routes):
    Batch.objects.filter(pk=finished.pk).update(status="running", completed_at=None)
    running = client.post(f"/api/v1/batches/{finished.id}/retry_failed")
    assert running.status_code == 409 and "running" in running.json()["detail"]
    clean = submit_batch(team=team, items=[{"custom_id": "x", "route": "intent", "query": "q"}])
    BatchItem.objects.filter(batch=clean).update(status="succeeded")
    Batch.objects.filter(pk=clean.pk).update(status="completed", completed_at=timezone.now())
    nothing = client.post(f"/api/v1/batches/{clean.id}/retry_failed")
    assert nothing.status_code == 409 and "no failed items" in nothing.json()["detail"]
    assert not Batch.objects.filter(metadata__has_key="retry_of").exists()


def test_retry_failed_when_a_route_is_gone_is_400_and_stores_nothing(client, finished):
    RoutingRule.objects.filter(route="intent").delete()
    before = Batch.objects.count(), BatchItem.objects.count()
    response = client.post(f"/api/v1/batches/{finished.id}/retry_failed")
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["errors"]} == {"route"}
    assert (Batch.objects.count(), BatchItem.objects.count()) == before


def test_retry_failed_of_another_teams_batch_is_404(client, other_team, routes):
    theirs = submit_batch(team=other_team, items=[{"custom_id": "x", "route": "intent", "query": "q"}])
    response = client.post(f"/api/v1/batches/{theirs.id}/retry_failed")
    assert response.status_code == 404 and response.json() == {"detail": "batch not found"}

"""GET batches (list/detail), results (paged and JSONL), cancel, usage."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
from django.utils import timezone

from batches.models import Batch, BatchItem, TeamUsageDaily
from batches.submission import submit_batch

from .helpers import URL, item

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_batch(team, routes):
    def make(n: int = 3, **fields) -> Batch:
        batch = submit_batch(team=team, items=[item(i) for i in range(n)])
        if fields:
            Batch.objects.filter(pk=batch.pk).update(**fields)
            batch.refresh_from_db()
        return batch

    return make


def test_list_newest_first_paginated_and_filtered(client, make_batch):
    batches = [make_batch(1) for _ in range(5)]
    base = timezone.now()
    for age, batch in enumerate(batches):  # batches[0] newest
        Batch.objects.filter(pk=batch.pk).update(created_at=base - dt.timedelta(minutes=age))
    Batch.objects.filter(pk=batches[1].pk).update(status="completed")

    page1 = client.get(URL, {"limit": 2}).json()
    assert [b["id"] for b in page1["results"]] == [str(b.id) for b in batches[:2]]
    assert page1["previous"] is None and page1["next"]
    page2 = client.get(page1["next"]).json()
    assert [b["id"] for b in page2["results"]] == [str(b.id) for b in batches[2:4]]
    page3 = client.get(page2["next"]).json()
    assert [b["id"] for b in page3["results"]] == [str(batches[4].id)] and page3["next"] is None

    completed = client.get(URL, {"status": "completed"}).json()["results"]
    assert [b["id"] for b in completed] == [str(batches[1].id)]
    assert len(client.get(URL, {"status": "queued"}).json()["results"]) == 4


@pytest.mark.parametrize(
    "raw", ["garbage", "p=notadate", "p=" + "9" * 50, "p=\x00", "o=99999999999999999999"]
)
def test_list_bad_or_forged_cursor_is_400(client, make_batch, raw):
    make_batch(1)
    cursor = raw if raw == "garbage" else base64.b64encode(raw.encode()).decode()
    response = client.get(URL, {"cursor": cursor})
    if raw.startswith("o="):  # a well-formed offset past the end is a harmless, empty page
        assert response.status_code == 200 and response.json()["results"] == [], response.content
    else:
        assert response.status_code == 400, response.content
        assert response.json()["errors"][0]["field"] == "cursor"


def test_list_invalid_status_is_400_naming_the_field(client):
    response = client.get(URL, {"status": "done"})
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "status" and "done" in error["message"]


def test_detail_is_the_batch_object_with_engine_stats(client, make_batch):
    stats = {
        "batch_id": "filled-by-engine",
        "task_total": 3,
        "success_count": 2,
        "failed_count": 1,
        "total_elapsed_ms": 1234,
        "providers": {
            "alpha": {
                "request_count": 4,
                "avg_latency_ms": 100,
                "p95_latency_ms": 200,
                "error_count": 1,
                "retry_count": 1,
                "rate_limited_count": 0,
            }
        },
        "token_usage": {"prompt_tokens": 30, "completion_tokens": 20, "retry_extra_tokens": 5},
    }
    now = timezone.now()
    batch = make_batch(
        3,
        status="completed",
        completed_count=2,
        failed_count=1,
        started_at=now,
        completed_at=now,
        stats=stats,
    )
    data = client.get(f"{URL}/{batch.id}").json()
    assert data["id"] == str(batch.id) and data["status"] == "completed"
    assert data["request_counts"] == {"total": 3, "completed": 2, "failed": 1, "cancelled": 0, "expired": 0}
    assert data["started_at"] and data["completed_at"]
    # a count the stored stats lack shows as 0, the per-endpoint part as {} (stats written before #39)
    assert data["stats"] == {**stats, "cache_hits": 0, "endpoints": {}}


def test_detail_before_execution_has_zeroed_stats(client, make_batch):
    batch = make_batch(4)
    data = client.get(f"{URL}/{batch.id}").json()
    assert data["started_at"] is None and data["completed_at"] is None
    assert data["stats"] == {
        "batch_id": str(batch.id),
        "task_total": 4,
        "success_count": 0,
        "failed_count": 0,
        "total_elapsed_ms": 0,
        "providers": {},
        "token_usage": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "retry_extra_tokens": 0,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
        },
        "cache_hits": 0,
        "endpoints": {},
    }


@pytest.fixture
def finished_batch(make_batch):
    """5 items: succeeded, failed, pending, cancelled, running."""
    batch = make_batch(5, status="running")
    items = {i.seq: i for i in batch.items.all()}
    BatchItem.objects.filter(pk=items[0].pk).update(
        status="succeeded",
        provider="alpha",
        attempts=2,
        latency_ms=321,
        response={"choices": [{"message": {"role": "assistant", "content": "ok"}}]},
        prompt_tokens=10,
        completion_tokens=5,
        total_tokens=15,
    )
    BatchItem.objects.filter(pk=items[1].pk).update(
        status="failed",
        provider="beta",
        attempts=1,
        latency_ms=50,
        error_type="client_error",
        error_status_code=400,
        error_message="bad request",
    )
    BatchItem.objects.filter(pk=items[3].pk).update(status="cancelled")
    BatchItem.objects.filter(pk=items[4].pk).update(status="running", provider="alpha", attempts=1)
    return batch


EXPECTED = [
    {
        "custom_id": "c0",
        "ok": True,
        "status": "succeeded",
        "provider": "alpha",
        "attempts": 2,
        "latency_ms": 321,
        "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}}]},
        "error": None,
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        "served_by": "realtime",
    },
    {
        "custom_id": "c1",
        "ok": False,
        "status": "failed",
        "provider": "beta",
        "attempts": 1,
        "latency_ms": 50,
        "response": None,
        "error": {"type": "client_error", "status_code": 400, "message": "bad request"},
        "usage": None,
        "served_by": "realtime",
    },
    {
        "custom_id": "c2",
        "ok": False,
        "status": "pending",
        "provider": "",
        "attempts": 0,
        "latency_ms": 0,
        "response": None,
        "error": {"type": "pending", "status_code": None, "message": "not sent yet"},
        "usage": None,
        "served_by": "realtime",
    },
    {
        "custom_id": "c3",
        "ok": False,
        "status": "cancelled",
        "provider": "",
        "attempts": 0,
        "latency_ms": 0,
        "response": None,
        "error": {"type": "cancelled", "status_code": None, "message": "cancelled before it was sent"},
        "usage": None,
        "served_by": "realtime",
    },
    {
        "custom_id": "c4",
        "ok": False,
        "status": "running",
        "provider": "alpha",
        "attempts": 1,
        "latency_ms": 0,
        "response": None,
        "error": {"type": "running", "status_code": None, "message": "in flight"},
        "usage": None,
        "served_by": "realtime",
    },
]


def test_results_paged_in_submission_order(client, finished_batch):
    url = f"{URL}/{finished_batch.id}/results"
    first = client.get(url, {"limit": 2}).json()
    assert first["results"] == EXPECTED[:2]
    assert first["next"].startswith("http://testserver/") and "after=1" in first["next"]
    second = client.get(first["next"]).json()
    assert second["results"] == EXPECTED[2:4]
    third = client.get(second["next"]).json()
    assert third["results"] == EXPECTED[4:] and third["next"] is None
    assert client.get(url).json() == {"results": EXPECTED, "next": None}


def test_results_jsonl_streams_every_result(client, finished_batch):
    response = client.get(f"{URL}/{finished_batch.id}/results", {"format": "jsonl"})
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"].startswith("application/jsonl")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [json.loads(line) for line in lines] == EXPECTED


def test_results_jsonl_large_batch_in_order(client, team, routes):
    batch = submit_batch(team=team, items=[item(i) for i in range(2500)])
    response = client.get(f"{URL}/{batch.id}/results?format=jsonl")
    ids = [json.loads(line)["custom_id"] for line in b"".join(response.streaming_content).splitlines()]
    assert ids == [f"c{i}" for i in range(2500)]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"after": "x"}, "after"),
        ({"format": "xml"}, "format"),
    ],
)
def test_results_invalid_query_is_400(client, finished_batch, params, field):
    response = client.get(f"{URL}/{finished_batch.id}/results", params)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_cancel_cancels_pending_items_only(client, finished_batch):
    response = client.post(f"{URL}/{finished_batch.id}/cancel")
    assert response.status_code == 200
    assert response.json()["id"] == str(finished_batch.id)
    statuses = dict(finished_batch.items.values_list("custom_id", "status"))
    assert statuses == {
        "c0": "succeeded",
        "c1": "failed",
        "c2": "cancelled",
        "c3": "cancelled",
        "c4": "running",  # in flight: finishes
    }


def test_cancel_queued_batch(client, make_batch):
    batch = make_batch(3)
    data = client.post(f"{URL}/{batch.id}/cancel").json()
    assert data["status"] == "cancelled"
    assert set(batch.items.values_list("status", flat=True)) == {"cancelled"}
    again = client.post(f"{URL}/{batch.id}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


def test_cancel_finished_batch_changes_nothing(client, make_batch):
    batch = make_batch(2, status="completed", completed_count=2)
    batch.items.update(status="succeeded")
    data = client.post(f"{URL}/{batch.id}/cancel").json()
    assert data["status"] == "completed"
    assert set(batch.items.values_list("status", flat=True)) == {"succeeded"}


@pytest.fixture
def usage_rows(team, other_team):
    def row(t, provider, day, **n):
        values = dict(
            requests=1,
            items_succeeded=1,
            items_failed=0,
            prompt_tokens=0,
            completion_tokens=0,
            wasted_tokens=0,
        )
        values.update(n)
        TeamUsageDaily.objects.create(team=t, provider=provider, day=dt.date.fromisoformat(day), **values)

    row(team, "alpha", "2026-11-01", requests=3, prompt_tokens=100, completion_tokens=50, wasted_tokens=7)
    row(team, "beta", "2026-11-01", requests=2, prompt_tokens=10, completion_tokens=5, items_failed=1)
    row(team, "alpha", "2026-11-02", requests=1, prompt_tokens=1, completion_tokens=1)
    row(other_team, "alpha", "2026-11-01", requests=99, prompt_tokens=9999)


def test_usage_by_day(client, usage_rows):
    data = client.get("/api/v1/usage").json()
    assert data["group_by"] == "day" and data["from"] is None and data["to"] is None
    assert [
        (r["day"], r["prompt_tokens"], r["completion_tokens"], r["total_tokens"]) for r in data["results"]
    ] == [
        ("2026-11-01", 110, 55, 165),
        ("2026-11-02", 1, 1, 2),
    ]
    first = data["results"][0]
    assert (first["requests"], first["items_succeeded"], first["items_failed"], first["wasted_tokens"]) == (
        5,
        2,
        1,
        7,
    )
    assert data["totals"]["prompt_tokens"] == 111 and data["totals"]["requests"] == 6


def test_usage_by_provider_with_range(client, usage_rows):
    data = client.get(
        "/api/v1/usage", {"group_by": "provider", "from": "2026-11-02", "to": "2026-11-30"}
    ).json()
    assert data["from"] == "2026-11-02" and data["to"] == "2026-11-30"
    assert [(r["provider"], r["total_tokens"]) for r in data["results"]] == [("alpha", 2)]
    all_time = client.get("/api/v1/usage", {"group_by": "provider"}).json()["results"]
    assert [(r["provider"], r["requests"]) for r in all_time] == [("alpha", 4), ("beta", 2)]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"group_by": "week"}, "group_by"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-13-01"}, "to"),
        ({"from": "2026-11-05", "to": "2026-11-01"}, "from"),
    ],
)
def test_usage_invalid_query_is_400(client, params, field):
    response = client.get("/api/v1/usage", params)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field

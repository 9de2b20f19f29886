"""Native batch → OpenAI batch object and output/error lines, through the HTTP API (Django test client):
statuses (all-failed is `completed`, expired, cancelled), error codes for expiry/budget/timeouts, HTTP
failures keep their status code, the upload size cap, and the input-line → ITEM conversion."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from gateway_engine.retry import ErrorType
from openai_api.conversion import native_item, result_line
from openai_api.models import File, OpenAIBatch
from sim.testing import run_simulator_in_thread

from .conftest import request_line

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(api_key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


def upload(client, lines, name="in.jsonl"):
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    return client.post(
        "/v1/files", {"file": SimpleUploadedFile(name, data), "purpose": "batch"}, format="multipart"
    )


def create(client, file_id, window="24h"):
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": window}
    return client.post("/v1/batches", body, format="json")


def content_lines(client, file_id) -> list[dict]:
    response = client.get(f"/v1/files/{file_id}/content")
    assert response.status_code == 200
    return [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]


@pytest.fixture
def held(monkeypatch):
    """New batches are stored but not started (the test plays the engine's part)."""
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)


def test_all_failed_native_batch_is_openai_completed_with_http_error_lines(
    client, make_provider, make_route, redis_sync
):
    sim_config = {"providers": {"refuse": {"fixed_status": 400}}}
    with run_simulator_in_thread(sim_config) as sim:
        make_route("chat", make_provider("refuse", base_url=sim.provider_url("refuse"), rpm=60000, tpm=10**8))
        file = upload(client, [request_line(f"x{i}", "chat") for i in range(3)]).json()
        batch = create(client, file["id"]).json()
    native = Batch.objects.get(openai_batch__id=batch["id"])
    assert native.status == BatchStatus.FAILED  # native: every item failed
    assert batch["status"] == "completed"  # OpenAI's failed means an invalid input file
    assert batch["request_counts"] == {"total": 3, "completed": 0, "failed": 3}
    assert batch["output_file_id"] is None
    lines = content_lines(client, batch["error_file_id"])
    assert [x["custom_id"] for x in lines] == ["x0", "x1", "x2"]
    for line in lines:
        assert line["error"] is None
        assert line["response"]["status_code"] == 400
        assert line["response"]["body"]["error"]["type"] == "invalid_request_error"
        assert line["response"]["body"]["error"]["code"] == "client_error"
        assert line["response"]["body"]["error"]["message"]


def test_expired_and_budget_items_map_to_openai_codes(client, team, make_provider, make_route, held):
    make_route("chat", make_provider("alpha"))
    file = upload(client, [request_line(f"e{i}", "chat") for i in range(4)]).json()
    created = create(client, file["id"], window="15m").json()
    assert created["status"] == "in_progress"
    assert created["expires_at"] - created["created_at"] == 900
    native = Batch.objects.get(openai_batch__id=created["id"])
    items = list(BatchItem.objects.filter(batch=native).order_by("seq"))
    now = timezone.now()
    # what the deadline/budget engine records (status and error type; batch status expired)
    BatchItem.objects.filter(pk=items[0].pk).update(
        status=ItemStatus.SUCCEEDED,
        response={"id": "chatcmpl-1", "object": "chat.completion", "choices": []},
        prompt_tokens=3,
        completion_tokens=4,
        total_tokens=7,
        finished_at=now,
    )
    BatchItem.objects.filter(pk=items[1].pk).update(
        status=ItemStatus.EXPIRED,
        error_type=ErrorType.EXPIRED,
        error_message="deadline passed",
        finished_at=now,
    )
    BatchItem.objects.filter(pk=items[2].pk).update(
        status=ItemStatus.FAILED,
        error_type=ErrorType.BUDGET_EXCEEDED,
        error_message="budget spent",
        finished_at=now,
    )
    BatchItem.objects.filter(pk=items[3].pk).update(
        status=ItemStatus.FAILED, error_type=ErrorType.TIMEOUT, error_message="timed out", finished_at=now
    )
    Batch.objects.filter(pk=native.pk).update(
        status=BatchStatus.EXPIRED,
        completed_count=1,
        failed_count=2,
        expired_count=1,
        completed_at=now,
        stats={"token_usage": {"prompt_tokens": 3, "completion_tokens": 4, "retry_extra_tokens": 0}},
    )
    batch = client.get(f"/v1/batches/{created['id']}").json()
    assert batch["status"] == "expired"
    assert batch["expired_at"] == int(now.timestamp())
    assert batch["request_counts"] == {"total": 4, "completed": 1, "failed": 3}
    assert batch["usage"]["input_tokens"] == 3 and batch["usage"]["output_tokens"] == 4
    assert batch["usage"]["total_tokens"] == 7
    out = content_lines(client, batch["output_file_id"])
    assert [(x["custom_id"], x["response"]["status_code"]) for x in out] == [("e0", 200)]
    errors = {x["custom_id"]: x for x in content_lines(client, batch["error_file_id"])}
    assert {k: (v["response"], v["error"]["code"]) for k, v in errors.items()} == {
        "e1": (None, "batch_expired"),
        "e2": (None, "budget_exceeded"),
        "e3": (None, "timeout"),
    }
    # files are written once; a second read returns the same ids
    again = client.get(f"/v1/batches/{created['id']}").json()
    assert (again["output_file_id"], again["error_file_id"]) == (
        batch["output_file_id"],
        batch["error_file_id"],
    )
    assert File.objects.filter(purpose="batch_output").count() == 2


def test_native_cancel_and_openai_list_paging(client, make_provider, make_route, held):
    make_route("chat", make_provider("alpha"))
    file = upload(client, [request_line("p", "chat")]).json()
    ids = [create(client, file["id"]).json()["id"] for _ in range(3)]
    page = client.get("/v1/batches", {"limit": 2}).json()
    assert [b["id"] for b in page["data"]] == ids[::-1][:2] and page["has_more"]
    assert page["first_id"] == ids[2] and page["last_id"] == ids[1]
    rest = client.get("/v1/batches", {"limit": 2, "after": page["last_id"]}).json()
    assert [b["id"] for b in rest["data"]] == [ids[0]] and not rest["has_more"]
    # cancelled on the native API: the same batch is cancelled on /v1 with a batch_cancelled line
    native = Batch.objects.get(openai_batch__id=ids[0])
    assert client.post(f"/api/v1/batches/{native.id}/cancel").status_code == 200
    batch = client.get(f"/v1/batches/{ids[0]}").json()
    assert batch["status"] == "cancelled" and batch["cancelled_at"] is not None
    [line] = content_lines(client, batch["error_file_id"])
    assert line["custom_id"] == "p" and line["error"]["code"] == "batch_cancelled"


@override_settings(GATEWAY_OPENAI_MAX_FILE_BYTES=2048)
def test_upload_over_the_cap_is_413_and_nothing_is_stored(client, files_root):
    big = [request_line(f"b{i}", "chat", content="x" * 200) for i in range(40)]  # ~10 KB, within the slack
    response = upload(client, big)
    assert response.status_code == 413, response.content
    assert response.json()["error"]["param"] == "file"
    huge = [
        request_line(f"h{i}", "chat", content="x" * 1000) for i in range(100)
    ]  # ~110 KB: refused by length
    response = upload(client, huge)
    assert response.status_code == 413
    assert "request is" in response.json()["error"]["message"]
    assert File.objects.count() == 0
    assert files_root.listdir("") == ([], [])
    assert upload(client, big[:2]).status_code == 200


def test_upload_needs_multipart_and_a_file(client):
    response = client.post("/v1/files", {"purpose": "batch"}, format="multipart")
    assert response.status_code == 400 and response.json()["error"]["param"] == "file"
    response = client.post("/v1/files", {"purpose": "batch"}, format="json")
    assert response.status_code == 415 and set(response.json()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }
    assert OpenAIBatch.objects.count() == 0


def test_input_line_becomes_a_native_item():
    routes, providers = frozenset({"chat"}), frozenset({"alpha", "chat"})
    line = request_line("a", "chat", max_tokens=5, temperature=0)
    item, errors = native_item(
        json.dumps(line).encode(), 1, endpoint="/v1/chat/completions", routes=routes, providers=providers
    )
    assert errors == []
    assert item == {
        "custom_id": "a",
        "route": "chat",  # a route wins over a provider of the same name
        "messages": line["body"]["messages"],
        "params": {"max_tokens": 5, "temperature": 0},
    }
    item, _ = native_item(
        json.dumps(request_line("b", "alpha")).encode(),
        2,
        endpoint="/v1/chat/completions",
        routes=routes,
        providers=providers,
    )
    assert item["provider"] == "alpha" and "route" not in item


def test_result_lines_per_error_type():
    def line(error_type, status_code=None, status="failed"):
        result = {"custom_id": "c", "ok": False, "status": status, "response": None, "usage": None,
                  "error": {"type": error_type, "status_code": status_code, "message": "m"}}  # fmt: skip
        return result_line(result, "batch_1")

    assert line("server_error", 503)[1]["response"]["status_code"] == 503
    assert line("rate_limited", 429)[1]["response"]["body"] == {
        "error": {"message": "m", "type": "rate_limit_error", "param": None, "code": "rate_limited"}
    }
    # #21: an Anthropic 529 and a billing refusal keep the provider's status; without one, a code
    assert line("overloaded", 529)[1]["response"]["status_code"] == 529
    assert line("provider_quota_exhausted", 402)[1]["response"]["body"]["error"]["code"] == (
        "provider_quota_exhausted"
    )
    assert line("provider_quota_exhausted")[1]["error"]["code"] == "provider_quota_exhausted"
    for kind, code in [
        ("timeout", "timeout"),
        ("cancelled", "batch_cancelled"),
        ("expired", "batch_expired"),
        ("budget_exceeded", "budget_exceeded"),
        ("quota_impossible", "quota_impossible"),
        ("connection_error", "connection_error"),
    ]:
        ok, body = line(kind)
        assert not ok and body["response"] is None and body["error"] == {"code": code, "message": "m"}
    ok, body = result_line({"custom_id": "c", "ok": True, "response": {"id": "x"}, "error": None}, "batch_1")
    assert ok and body["response"]["body"] == {"id": "x"} and body["error"] is None
    assert (
        body["id"]
        == result_line({"custom_id": "c", "ok": True, "response": {}, "error": None}, "batch_1")[1]["id"]
    )


def test_odd_filenames_are_kept_safe_in_the_download_header(client):
    response = upload(client, [request_line("a", "chat")], name='we"ird\nname.jsonl')
    assert response.status_code == 200, response.content
    file = response.json()
    assert "\n" not in file["filename"]
    download = client.get(f"/v1/files/{file['id']}/content")
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith("attachment; filename=")
    assert json.loads(b"".join(download.streaming_content))["custom_id"] == "a"


def test_throttled_key_gets_openai_rate_limit_error(client, redis_sync):
    from django.conf import settings

    rates = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api_key": "2/min"}}
    with override_settings(REST_FRAMEWORK=rates):
        statuses = [client.get("/v1/files").status_code for _ in range(3)]
        response = client.get("/v1/batches")
    assert statuses == [200, 200, 429]
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"

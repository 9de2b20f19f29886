"""The real openai SDK against a running stack: Django's live server (web), a real
`celery -A gateway_site worker` process, and the provider simulator. A 300-line OpenAI batch file over
three routes (one provider answers ~5 % 500s and is not retried) runs to `completed`; every custom_id is
in exactly one of the output and error files, with the answer the gateway used; request_counts and usage
equal the native API's numbers for the same batch and the tokens of the answers in the output file."""

from __future__ import annotations

import json
import time
from collections import Counter

import httpx
import pytest

from openai_api.models import OpenAIBatch
from sim.testing import run_simulator_in_thread

from .conftest import jsonl, read_jsonl, request_line

pytestmark = [pytest.mark.django_db(transaction=True)]

SIM = {
    "time_scale": 1,
    "seed": 7,
    "providers": {
        "oa": {"rpm": 100000, "tpm": 100000000, "median_ms": 5, "sigma": 0.2},
        "ob": {"rpm": 100000, "tpm": 100000000, "median_ms": 5, "sigma": 0.2},
        "oc": {"rpm": 100000, "tpm": 100000000, "median_ms": 5, "sigma": 0.2, "error_rate_500": 0.05},
    },
}
ROUTES = {"summarize": "oa", "classify": "ob", "translate": "oc"}


def wait_for_end(client, batch_id: str, seconds: float):
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if not seen or seen[-1] != batch.status:
            seen.append(batch.status)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch, seen
        time.sleep(0.2)
    raise AssertionError(f"batch did not end in {seconds} s; statuses seen: {seen}")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sdk_300_lines_three_routes_real_worker(
    sdk, api_key, live_server, make_provider, make_route, redis_sync, celery_worker_queue
):
    raw_key = api_key[1]
    client = sdk(raw_key)
    with run_simulator_in_thread(SIM) as sim:
        for route, name in ROUTES.items():
            provider = make_provider(
                name,
                base_url=sim.provider_url(name),
                rpm=60000,
                tpm=10**8,
                max_concurrency=20,
                max_retries=0 if name == "oc" else 3,
            )
            make_route(route, provider)
        routes = list(ROUTES)
        lines = [
            request_line(f"req-{i:03d}", routes[i % 3], f"question {i}", max_tokens=4 + i % 5, temperature=0)
            for i in range(300)
        ]
        uploaded = client.files.create(file=jsonl(lines), purpose="batch")
        created = client.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/chat/completions",
            completion_window="1h",
            metadata={"job": "sdk-e2e"},
            extra_body={"priority": "high"},
        )
        assert created.status == "in_progress", created
        assert created.request_counts.total == 300
        assert created.input_file_id == uploaded.id and created.metadata == {"job": "sdk-e2e"}
        assert created.expires_at - created.created_at == 3600

        batch, seen = wait_for_end(client, created.id, 150)
        if batch.status != "completed":
            raise AssertionError((batch, celery_worker_queue.read_text()[-3000:]))
        assert seen[-1] == "completed" and set(seen) <= {"in_progress", "finalizing", "completed"}
        assert batch.completed_at and batch.finalizing_at and batch.in_progress_at
        counters = sim.counters()["providers"]

    # the native view of the same batch
    native_id = OpenAIBatch.objects.get(pk=batch.id).batch_id
    http = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=60)
    native = http.get(f"/api/v1/batches/{native_id}").json()
    results = {
        r["custom_id"]: r
        for r in map(
            json.loads, http.get(f"/api/v1/batches/{native_id}/results?format=jsonl").text.splitlines()
        )
    }
    assert native["priority"] == "high" and native["completion_window"] == "1h"
    assert native["metadata"] == {"job": "sdk-e2e"}

    output = read_jsonl(client.files.content(batch.output_file_id).text)
    errors = read_jsonl(client.files.content(batch.error_file_id).text) if batch.error_file_id else []
    ids = Counter(line["custom_id"] for line in output + errors)
    assert ids == Counter(line["custom_id"] for line in lines)  # every custom_id exactly once

    for line in output:
        result = results[line["custom_id"]]
        assert result["ok"] and line["error"] is None
        assert line["id"].startswith("batch_req_")
        assert line["response"]["status_code"] == 200
        body = line["response"]["body"]
        assert body == result["response"]  # the answer the gateway used
        route = routes[int(line["custom_id"][4:]) % 3]
        assert (
            body["model"] == f"{ROUTES[route]}-chat"
        )  # body.model was the route, replaced by the provider's
        assert body["choices"][0]["message"]["content"].startswith(f"[{ROUTES[route]}]")
        assert body["usage"]["completion_tokens"] == 4 + int(line["custom_id"][4:]) % 5
    for line in errors:
        result = results[line["custom_id"]]
        assert not result["ok"] and result["provider"] == "oc"
        assert line["error"] is None
        assert line["response"]["status_code"] == 500 == result["error"]["status_code"]
        assert line["response"]["body"]["error"]["type"] == "server_error"
        assert line["response"]["body"]["error"]["message"] == result["error"]["message"]
    # the flaky provider's 500s are exactly the error lines (no retries for it), and there were some
    assert len(errors) == counters["oc"]["errors_500"] > 0

    counts = native["request_counts"]
    assert batch.request_counts.total == counts["total"] == 300
    assert batch.request_counts.completed == counts["completed"] == len(output)
    assert (
        batch.request_counts.failed
        == counts["failed"] + counts["cancelled"] + counts["expired"]
        == len(errors)
    )
    prompt = sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in output)
    completion = sum(line["response"]["body"]["usage"]["completion_tokens"] for line in output)
    assert batch.usage.input_tokens == native["stats"]["token_usage"]["prompt_tokens"] == prompt
    assert batch.usage.output_tokens == native["stats"]["token_usage"]["completion_tokens"] == completion
    assert batch.usage.total_tokens == prompt + completion

    # the same batch in the OpenAI list, newest first, with cursor paging
    listed = client.batches.list(limit=10)
    assert [b.id for b in listed.data] == [batch.id] and not listed.has_more
    assert {f.purpose for f in client.files.list().data} == {"batch", "batch_output"}

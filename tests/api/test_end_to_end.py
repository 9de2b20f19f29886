"""Through the API end to end: POST a JSONL batch, the engine runs it (eager Celery) against the bundled
provider simulator, then read the batch object, the results and the usage back over the API."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from sim.testing import run_simulator_in_thread

from .helpers import URL

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SIM = {
    "time_scale": 1,
    "seed": 3,
    "providers": {
        "e2e-a": {"rpm": 100000, "tpm": 100000000, "median_ms": 5, "sigma": 0.1, "max_concurrency": 50},
        "e2e-b": {"rpm": 100000, "tpm": 100000000, "median_ms": 5, "sigma": 0.1, "max_concurrency": 50},
    },
}


def test_submit_run_and_read_back_over_the_api(api_key, make_provider, make_route, redis_sync):
    with run_simulator_in_thread(SIM) as sim:
        a = make_provider(
            "e2e-a", base_url=sim.provider_url("e2e-a"), rpm=60000, tpm=10**8, max_concurrency=10
        )
        make_provider("e2e-b", base_url=sim.provider_url("e2e-b"), rpm=60000, tpm=10**8, max_concurrency=10)
        make_route("e2e", a)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
        items = [
            {"custom_id": f"u{i}", "route": "e2e", "query": f"hello {i}", "params": {"max_tokens": 8}}
            for i in range(15)
        ]
        items += [
            {"custom_id": "direct", "provider": "e2e-b", "messages": [{"role": "user", "content": "hi"}]}
        ]
        body = "".join(json.dumps(x) + "\n" for x in items)
        created = client.generic("POST", URL, body, content_type="application/jsonl")
        assert created.status_code == 201, created.content
        batch_id = created.json()["id"]

        batch = client.get(f"{URL}/{batch_id}").json()
        assert batch["status"] == "completed"
        assert batch["request_counts"] == {
            "total": 16,
            "completed": 16,
            "failed": 0,
            "cancelled": 0,
            "expired": 0,
        }
        assert batch["stats"]["success_count"] == 16
        assert set(batch["stats"]["providers"]) == {"e2e-a", "e2e-b"}

        streamed = client.get(f"{URL}/{batch_id}/results", {"format": "jsonl"})
        results = [json.loads(line) for line in b"".join(streamed.streaming_content).splitlines()]
        assert [r["custom_id"] for r in results] == [x["custom_id"] for x in items]
        assert all(r["ok"] and r["error"] is None and r["response"]["choices"] for r in results)
        assert {r["provider"] for r in results} == {"e2e-a", "e2e-b"}
        assert results[-1]["provider"] == "e2e-b"
        tokens = sum(r["usage"]["total_tokens"] for r in results)
        assert tokens > 0

        usage = client.get("/api/v1/usage", {"group_by": "provider"}).json()
        assert {row["provider"] for row in usage["results"]} == {"e2e-a", "e2e-b"}
        assert usage["totals"]["total_tokens"] == tokens
        assert usage["totals"]["items_succeeded"] == 16

"""Single-process mode (no workers): the batch runs on a background thread of the web process, so the
POST answers 201 at once with a queued batch and progress is polled, as with real workers."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from sim.testing import run_simulator_in_thread

from .helpers import URL

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

SIM = {
    "time_scale": 1,
    "seed": 5,
    # slow enough that a synchronous run could not have finished inside the POST
    "providers": {
        "bg": {"rpm": 100000, "tpm": 100000000, "median_ms": 300, "sigma": 0.05, "max_concurrency": 50}
    },
}


@override_settings(GATEWAY_BACKGROUND_EAGER=True)
def test_post_returns_queued_and_the_batch_completes_in_the_background(api_key, make_provider, make_route):
    with run_simulator_in_thread(SIM) as sim:
        provider = make_provider(
            "bg", base_url=sim.provider_url("bg"), rpm=60000, tpm=10**8, max_concurrency=2
        )
        make_route("bg", provider)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
        items = [{"custom_id": f"u{i}", "route": "bg", "query": f"hi {i}"} for i in range(6)]
        body = "".join(json.dumps(x) + "\n" for x in items)
        created = client.generic("POST", URL, body, content_type="application/jsonl")
        assert created.status_code == 201, created.content
        assert created.json()["status"] == "queued"
        batch_id = created.json()["id"]
        # a synchronous run would be over before the POST answered; 6 calls of ~300 ms, 2 at a time, are not
        assert client.get(f"{URL}/{batch_id}").json()["status"] in ("queued", "running")
        assert any(t.name == f"batch-{batch_id}" for t in threading.enumerate())

        deadline = time.monotonic() + 60
        seen = set()
        while time.monotonic() < deadline:
            batch = client.get(f"{URL}/{batch_id}").json()
            seen.add(batch["status"])
            if batch["status"] == "completed":
                break
            time.sleep(0.05)
        assert batch["status"] == "completed", batch
        assert batch["request_counts"] == {
            "total": 6,
            "completed": 6,
            "failed": 0,
            "cancelled": 0,
            "expired": 0,
        }
        assert "running" in seen
        for t in threading.enumerate():
            if t.name == f"batch-{batch_id}":
                t.join(timeout=10)

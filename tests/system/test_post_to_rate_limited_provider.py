"""The whole path under a provider's rate limit: REST POST → on-commit enqueue → Redis broker → two real
`celery -A gateway_site worker` processes (shared quota in Redis) → a simulator that enforces the same
RPM as the gateway. The simulator (its own process) records every arrival; the provider must never
answer 429 and never see a burst above the bucket's capacity."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch
from bench.common import peak_burst
from sim.testing import run_simulator_subprocess
from tests.waiting import wait_until
from tests.workers import delete_queue, send_start_batch, start_worker, stop_worker, test_queue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RPM = 600  # 10 requests/s at the gateway AND at the simulator
BURST_S = 1.0  # bucket capacity 10 at both
ITEMS = 80

SIM = {
    "time_scale": 1,
    "seed": 11,
    "trace_tag_regex": r"\[(s\d+)\]",
    "providers": {
        "limited": {
            "model": "limited-m",
            "rpm": RPM,
            "tpm": 100_000_000,
            "burst_seconds": BURST_S,
            "median_ms": 20,
            "sigma": 0.2,
        }
    },
}


@pytest.mark.timeout(180)
def test_post_broker_two_workers_never_exceed_the_providers_rate_limit(
    api_key, make_provider, make_route, redis_sync, tmp_path, monkeypatch
):
    queue = test_queue("system")
    sent: list[str] = []

    def enqueue_start(batch_id: str) -> None:  # the web side hands the batch to this test's queue
        sent.append(batch_id)
        send_start_batch(batch_id, queue)

    monkeypatch.setattr(submission.enqueue, "enqueue_start", enqueue_start)
    workers = [
        start_worker(n, queue, tmp_path / f"{n}.log", GATEWAY_CHUNK_SIZE="20") for n in ("sys1", "sys2")
    ]
    try:
        with run_simulator_subprocess(SIM, log_path=tmp_path / "sim.log") as sim:
            provider = make_provider(
                "limited",
                base_url=sim.provider_url("limited"),
                model="limited-m",
                rpm=RPM,
                tpm=100_000_000,
                burst_seconds=BURST_S,
                max_concurrency=16,
                timeout_seconds=10,
                max_retries=0,  # a 429 would fail its item: it cannot hide behind a retry
            )
            make_route("limited", provider)
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
            items = [
                {
                    "custom_id": f"s{i}",
                    "route": "limited",
                    "query": f"[s{i}] question",
                    "params": {"max_tokens": 4},
                }
                for i in range(ITEMS)
            ]
            response = client.post("/api/v1/batches", {"items": items}, format="json")
            assert response.status_code == 201, response.content
            batch_id = response.json()["id"]
            assert sent == [batch_id]  # it went to the broker, not run in this process

            def logs() -> dict:
                return {p.name: p.read_text(errors="replace")[-2000:] for p in tmp_path.glob("*.log")}

            def ended() -> str | None:
                status = client.get(f"/api/v1/batches/{batch_id}").json()["status"]
                return status if status in ("completed", "failed", "cancelled") else None

            status = wait_until(ended, 150, 0.5, what="the batch to end", on_fail=lambda: str(logs()))
            assert status == "completed", (status, logs())
            counters = sim.provider_counters("limited")
            trace = sim.trace()
    finally:
        for proc in workers:
            stop_worker(proc)
        delete_queue(queue)

    batch = Batch.objects.get(pk=batch_id)
    assert batch.items.filter(status="succeeded").count() == ITEMS
    rows = [row for row in trace if row["provider"] == "limited"]
    statuses = [row["status"] for row in rows]
    assert statuses.count(429) == 0 and counters["rate_limited_429"] == 0, (statuses, counters)
    assert sorted(row["tag"] for row in rows) == sorted(f"s{i}" for i in range(ITEMS))  # each item once
    # the two workers together stay inside one bucket: capacity + rate × window (+1 for arrival jitter)
    burst = peak_burst([row["arrival_s"] for row in rows], RPM / 60.0)
    assert burst <= RPM / 60.0 * BURST_S + 1, burst

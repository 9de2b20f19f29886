"""/metrics after a batch run by two real Celery worker processes equals what the simulator counted."""

from __future__ import annotations

import json
import time
import warnings

import pytest
from celery.exceptions import AlwaysEagerIgnored
from django.test import override_settings

from batches.models import Batch, BatchItem, ItemStatus
from gateway_site import celery_app
from observability.logs import request_id_var
from providers.adapters import provider_limits
from providers.models import Provider
from tests.factories import make_batch
from tests.factories import work_item as q
from tests.workers import test_queue

from .helpers import PoolWatch, delete_queue, samples, start_worker, stop, value

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SIM = {
    "providers": {
        # the first five answers are scripted failures (not billed), then normal
        "alpha": {"median_ms": 15, "status_script": [429, 429, 429, 500, 500], "completion_tokens": 5},
        "beta": {"median_ms": 60, "completion_tokens": 7},  # slow enough to see leases held mid-run
        "gamma": {"median_ms": 5, "fixed_status": 400},  # every item fails, never retried
    }
}


def run_batch_on_two_workers(
    sim, team, make_provider, tmp_path, items, request_id, on_poll=None, **worker_env
):
    batch = make_batch(team, items)
    bid = str(batch.id)
    queue = test_queue("obs")
    workers = [
        start_worker(n, queue, tmp_path / f"{n}.log", GATEWAY_CHUNK_SIZE="40", **worker_env)
        for n in ("w1", "w2")
    ]
    watch = PoolWatch(workers).__enter__()  # the pool children, if the workers have a prefork pool
    try:
        token = request_id_var.set(request_id)
        try:
            with warnings.catch_warnings():  # send_task goes through the broker even in eager mode
                warnings.simplefilter("ignore", AlwaysEagerIgnored)
                celery_app.send_task("batches.start_batch", args=[bid], queue=queue)
        finally:
            request_id_var.reset(token)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            batch.refresh_from_db()
            if batch.completed_at is not None:
                break
            if on_poll is not None:
                on_poll()
            time.sleep(0.05)
        assert batch.completed_at is not None, (tmp_path / "w1.log").read_text()[-3000:]
    finally:
        for proc in workers:
            stop(proc)
        watch.__exit__(None, None, None)
        delete_queue(queue)
    return batch, workers, watch.children


@pytest.mark.timeout(240)
def test_metrics_after_two_worker_batch_equal_simulator_counts(
    sim_server, team, make_provider, redis_sync, tmp_path, client
):
    sim = sim_server(SIM)
    make_provider("alpha", base_url=sim.provider_url("alpha"), rpm=60_000, tpm=10**8, max_concurrency=4,
                  burst_seconds=1, timeout_seconds=5, max_retries=5, price_prompt_per_million="2",
                  price_completion_per_million="6")  # fmt: skip
    make_provider("beta", base_url=sim.provider_url("beta"), rpm=60_000, tpm=10**8, max_concurrency=3,
                  burst_seconds=2, timeout_seconds=5)  # fmt: skip
    make_provider("gamma", base_url=sim.provider_url("gamma"), rpm=60_000, tpm=10**8, max_concurrency=2,
                  burst_seconds=1, timeout_seconds=5)  # fmt: skip
    items = [q(f"a{i:03d}", provider="alpha", max_tokens=5) for i in range(100)]
    items += [q(f"b{i:03d}", provider="beta", max_tokens=7) for i in range(100)]
    items += [q(f"g{i}", provider="gamma", max_tokens=5) for i in range(4)]
    metrics_dir = tmp_path / "prom"
    metrics_dir.mkdir()
    in_flight_seen: list[dict[str, float]] = []

    def scrape_mid_run() -> None:  # the live lease gauges while the workers hold leases
        with override_settings(GATEWAY_METRICS_DIR=str(metrics_dir)):
            mid = samples(client.get("/metrics").content.decode())
        in_flight_seen.append(
            {p: value(mid, "gateway_leases_in_flight", provider=p) for p in ("alpha", "beta")}
        )

    batch, workers, children = run_batch_on_two_workers(
        sim, team, make_provider, tmp_path, items, "req-obs-1", on_poll=scrape_mid_run,
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
    )  # fmt: skip
    counted = sim.counters()["providers"]

    with override_settings(GATEWAY_METRICS_DIR=str(metrics_dir)):
        response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    m = samples(text)

    # worker processes write their own files and /metrics sums them (the equalities below). Which workers
    # run dispatcher slices is Celery's choice: at least one did, and no file comes from anyone else.
    # (A count off here once came from a dispatcher in the pytest process itself, started by a
    # reconciler thread an earlier single-process-mode test had left running: the provider saw its
    # calls, no worker file did. tests/conftest.py now ends such threads after every test.)
    # (With a prefork pool the engine runs in the workers' pool children: their files count.)
    pids = {p.stem.rsplit("_", 1)[-1] for p in metrics_dir.glob("counter_*.db")}
    worker_pids = {str(pid) for pid in {w.pid for w in workers} | children}
    assert pids & worker_pids and pids <= worker_pids, (pids, worker_pids)

    for name in ("alpha", "beta", "gamma"):
        c = counted[name]
        assert value(m, "gateway_provider_requests_total", provider=name) == c["requests"], name
        assert (
            value(m, "gateway_provider_requests_total", provider=name, outcome="429") == c["rate_limited_429"]
        )
        assert value(m, "gateway_provider_request_duration_seconds_count", provider=name) == c["requests"]
        assert (
            value(m, "gateway_provider_tokens_total", provider=name, kind="prompt")
            == c["billed_prompt_tokens"]
        )
        assert (
            value(m, "gateway_provider_tokens_total", provider=name, kind="completion")
            == c["billed_completion_tokens"]
        )
    assert counted["alpha"]["rate_limited_429"] == 3 and counted["gamma"]["requests"] == 4
    assert value(m, "gateway_provider_requests_total", provider="alpha", outcome="5xx") == 2
    assert value(m, "gateway_provider_requests_total", provider="alpha", outcome="ok") == 100
    assert value(m, "gateway_provider_requests_total", provider="gamma", outcome="4xx") == 4
    assert value(m, "gateway_retries_total", provider="alpha", reason="rate_limited") == 3
    assert value(m, "gateway_retries_total", provider="alpha", reason="server_error") == 2
    assert value(m, "gateway_items_total", status="succeeded") == 200
    assert value(m, "gateway_items_total", status="failed") == 4
    assert value(m, "gateway_provider_tokens_total", team="acme") > 0
    # cost: alpha has prices (2 / 6 per million), beta and gamma none
    expected = (
        counted["alpha"]["billed_prompt_tokens"] * 2 + counted["alpha"]["billed_completion_tokens"] * 6
    ) / 1e6
    assert value(m, "gateway_provider_cost_total", provider="alpha", team="acme") == pytest.approx(expected)
    assert value(m, "gateway_provider_cost_total", provider="beta") == 0
    assert value(m, "gateway_quota_wait_seconds_count", provider="alpha") == counted["alpha"]["requests"]
    assert value(m, "gateway_batch_duration_seconds_count") == 1
    assert value(m, "gateway_batches", status="completed") == 1

    # live gauges read from Redis, consistent with each provider's settings
    for name, concurrency, rpm, burst in (
        ("alpha", 4, 60_000, 1),
        ("beta", 3, 60_000, 2),
        ("gamma", 2, 60_000, 1),
    ):
        assert value(m, "gateway_leases_max", provider=name) == concurrency
        assert value(m, "gateway_leases_in_flight", provider=name) == 0  # batch done: every lease released
        # rate × burst less the conformance margin (docs/quota.md), as the workers compute it
        capacity = provider_limits(Provider.objects.get(name=name)).rpm_capacity
        assert capacity <= rpm / 60 * burst
        assert value(m, "gateway_quota_capacity", provider=name, bucket="rpm") == pytest.approx(capacity)
        available = value(m, "gateway_quota_tokens_available", provider=name, bucket="rpm")
        assert 0 <= available <= capacity
        assert value(m, "gateway_breaker_state", provider=name) == 0
    assert value(m, "gateway_scrape_errors", source="quota") == 0
    assert value(m, "gateway_engine_runs") == 0  # livesum: nothing runs now
    # mid-run scrapes: leases held never above max_concurrency (cluster-wide, both workers), and seen held
    assert len(in_flight_seen) >= 3
    assert all(0 <= s["alpha"] <= 4 and 0 <= s["beta"] <= 3 for s in in_flight_seen), in_flight_seen
    assert max(s["beta"] for s in in_flight_seen) >= 1, in_flight_seen

    # the request id set when the batch was sent reached the workers' failed-item events
    failed = [
        json.loads(line)
        for w in ("w1", "w2")
        for line in (tmp_path / f"{w}.log").read_text().splitlines()
        if line.startswith("{") and '"item_failed"' in line
    ]
    assert sorted(e["custom_id"] for e in failed) == [f"g{i}" for i in range(4)]
    events = [
        json.loads(line)
        for w in ("w1", "w2")
        for line in (tmp_path / f"{w}.log").read_text().splitlines()
        if line.startswith("{")
    ]
    paused = [e for e in events if e.get("event") == "provider_paused"]
    assert len(paused) == 3 and {e["provider"] for e in paused} == {"alpha"}  # one per 429 with Retry-After
    assert sum(1 for e in events if e.get("event") == "batch_started") == 1
    assert {e["request_id"] for e in failed} == {"req-obs-1"}
    assert BatchItem.objects.filter(batch=batch, status=ItemStatus.FAILED).count() == 4
    assert (
        Batch.objects.get(id=batch.id).stats["providers"]["alpha"]["request_count"]
        == counted["alpha"]["requests"]
    )

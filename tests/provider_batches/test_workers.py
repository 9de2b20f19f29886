"""The provider-batch route with real processes: `celery -A gateway_site worker` (default prefork pool,
two children; its reconciler drives the due work), real PostgreSQL and Redis, the simulator. One worker
for the module. 2,000-item batches through one provider batch (OpenAI kind, and Anthropic whose results
come out of order), and kill -9 of the worker's children inside the create gap (the simulator answers the
create 3 s after storing the batch) and during the result download: never a second provider batch, no
item applied twice (tests/exactly_once.py counts the simulator's batch lines per custom id)."""

from __future__ import annotations

import os
import signal

import pytest

from batches.models import BatchItem, ItemStatus
from batches.selectors import result_page
from batches.submission import enqueue
from provider_batches.models import ChunkState, ProviderBatch
from sim.testing import run_simulator_in_thread
from tests.exactly_once import assert_exactly_once
from tests.openai.conftest import files_root  # noqa: F401 - the /v1 files under a temp dir
from tests.waiting import wait_until
from tests.workers import delete_queue, pool_children, send_start_batch, start_worker, stop_worker, test_queue

from .helpers import batch_provider, items, sim_config, sim_provider, submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CONFIG = sim_config(
    oa=sim_provider("openai", turnaround_ms=800_000),
    an=sim_provider("anthropic", turnaround_ms=800_000),
    oa_gap=sim_provider("openai", batch_create_delay_ms=3_000_000),
    an_gap=sim_provider("anthropic", batch_create_delay_ms=3_000_000),
    # a results download is held 2 s before its answer: the kill lands inside it
    oa_dl=sim_provider("openai", batch_download_delay_ms=2_000_000),
    an_dl=sim_provider("anthropic", batch_download_delay_ms=2_000_000),
    oa_late=sim_provider("openai", turnaround_ms=1e9, batch_progress=True),  # turnaround ≫ the window
)
WORKER_ENV = {
    "GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS": "0.1",
    "GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS": "0.5",
    "GATEWAY_CLAIM_LEASE_SECONDS": "3",  # the reconciler passes every second
    "GATEWAY_DISPATCH_SLICE_SECONDS": "2",  # idle dispatcher slices end soon (a quick warm shutdown)
    "GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS": "8.5",  # of a 10 s window (the 24 h ones: no effect)
}


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    queue = test_queue("pbatch")
    log_path = tmp_path_factory.mktemp("pbatch-worker") / "worker.log"
    proc = start_worker(
        "pbatch", queue, log_path, loglevel=os.environ.get("PB_LOGLEVEL", "WARNING"), **WORKER_ENV
    )
    yield proc, queue, log_path
    stop_worker(proc)
    delete_queue(queue)


@pytest.fixture(autouse=True)
def _to_the_worker(worker, sim, monkeypatch):
    """Submissions hand their batch to the module's worker (not to this process's eager engine)."""
    _proc, queue, _log = worker
    sim.reset()
    monkeypatch.setattr(enqueue, "enqueue_start", lambda batch_id: send_start_batch(batch_id, queue))


def wait_done(batch, timeout: float = 90.0):
    def done() -> bool:
        batch.refresh_from_db()
        return batch.completed_at is not None

    wait_until(done, timeout=timeout, interval=0.1, what=f"batch {batch.id} to end")
    return batch


def kill_children(proc) -> list[int]:
    killed = pool_children(proc)
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    return killed


@pytest.mark.parametrize("name,kind", [("oa", "openai"), ("an", "anthropic")])
def test_2000_items_through_one_provider_batch(team, make_provider, sim, name, kind):
    batch_provider(make_provider, sim, name, kind, batch_price_factor=0.5)
    batch = wait_done(submit(team, items(2000, name)))

    assert sum(sim.request_counts().get(name, {}).values()) == 0  # 0 real-time calls
    counters = sim.counters()["providers"][name]
    assert counters["batches_created"] == 1
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert (chunk.line_count, chunk.applied_count, chunk.state) == (2000, 2000, ChunkState.DONE)
    results, _ = result_page(batch, limit=5000)
    assert len(results) == 2000 and {r["served_by"] for r in results} == {"provider_batch"}
    assert {r["status"] for r in results} == {"succeeded"}
    p = batch.stats["providers"][name]
    realtime = (p["prompt_tokens"] * 1 + p["completion_tokens"] * 2) / 1e6
    assert p["cost"] == pytest.approx(0.5 * realtime, abs=1e-6)
    assert p["request_count"] == 2000  # the lines
    assert batch.stats["batch_api_calls"] >= 3  # (OpenAI: upload,) create, a poll, the download
    part = p["provider_batch"]
    assert part["request_count"] == 2000 and part["prompt_tokens"] == p["prompt_tokens"] > 0
    assert part["realtime_cost"] == pytest.approx(realtime, abs=1e-6)
    assert batch.stats["token_usage"]["saved_vs_realtime"] == pytest.approx(0.5 * realtime, abs=1e-6)
    assert_exactly_once([batch], [sim])


@pytest.mark.parametrize("name,kind", [("oa_gap", "openai"), ("an_gap", "anthropic")])
def test_kill_9_in_the_create_gap_adopts_the_provider_batch(team, make_provider, sim, worker, name, kind):
    proc = worker[0]
    batch_provider(make_provider, sim, name, kind)
    batch = submit(team, items(300, name))

    def create_in_flight() -> bool:
        chunk = ProviderBatch.objects.filter(batch=batch).first()
        stored = sim.counters()["providers"][name]["batches_created"]
        return chunk is not None and chunk.create_attempts == 1 and not chunk.remote_id and stored == 1

    wait_until(create_in_flight, timeout=30, what="the create call to be inside its gap")
    assert kill_children(proc)
    wait_done(batch)

    assert sim.counters()["providers"][name]["batches_created"] == 1  # adopted, never created again
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert chunk.create_attempts == 1 and chunk.applied_count == 300
    assert set(BatchItem.objects.filter(batch=batch).values_list("status", flat=True)) == {
        ItemStatus.SUCCEEDED
    }
    assert_exactly_once([batch], [sim])


@pytest.mark.parametrize("name,kind", [("oa_dl", "openai"), ("an_dl", "anthropic")])
def test_kill_9_during_the_result_download_applies_each_line_once(
    team, make_provider, sim, worker, name, kind
):
    proc = worker[0]
    batch_provider(make_provider, sim, name, kind)
    batch = submit(team, items(300, name))

    def downloading() -> bool:
        chunk = ProviderBatch.objects.filter(batch=batch).first()
        started = sim.counters()["providers"][name]["batch_results_downloads"]
        return (
            chunk is not None
            and chunk.remote_state == "ended"
            and chunk.state != ChunkState.DONE
            and started >= 1
        )

    wait_until(downloading, timeout=60, interval=0.02, what="the result download to be held by the simulator")
    assert kill_children(proc)
    wait_done(batch)

    counters = sim.counters()["providers"][name]
    assert counters["batches_created"] == 1 and counters["batch_results_downloads"] >= 2  # read again
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert chunk.state == ChunkState.DONE and chunk.applied_count == 300
    assert set(BatchItem.objects.filter(batch=batch).values_list("status", flat=True)) == {
        ItemStatus.SUCCEEDED
    }
    assert BatchItem.objects.filter(batch=batch, attempts=1).count() == 300  # each line applied once
    assert_exactly_once([batch], [sim])


def test_deadline_guard_with_workers_the_rest_finish_in_real_time_before_expiry(team, make_provider, sim):
    batch_provider(make_provider, sim, "oa_late", "openai", batch_min_window_seconds=10)
    batch = wait_done(submit(team, items(60, "oa_late"), window="10s"), timeout=60)
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert chunk.cancel_reason == "deadline" and chunk.realtime_count > 0
    rows = list(BatchItem.objects.filter(batch=batch))
    assert {r.status for r in rows} == {ItemStatus.SUCCEEDED}
    assert all(r.finished_at <= batch.expires_at for r in rows)  # every item before expires_at
    realtime = sim.request_counts().get("oa_late", {})
    assert len(realtime) == chunk.realtime_count and set(realtime.values()) == {1}  # no item twice
    assert_exactly_once([batch], [sim])


def test_v1_batches_through_the_openai_sdk_with_a_24h_window(
    team, make_provider, make_route, sim, live_server
):
    """`/v1/batches` through the real openai SDK (extra_body provider_batch) on the live server:
    served through the provider-batch route end to end, the output file holds every line once."""
    import openai

    from openai_api.models import OpenAIBatch
    from teams.services import create_api_key
    from tests.openai.conftest import jsonl, read_jsonl, request_line

    provider = batch_provider(make_provider, sim, "oa", "openai")
    make_route("summarize", provider)
    client = openai.OpenAI(
        base_url=live_server.url + "/v1", api_key=create_api_key(team, "sdk")[1], max_retries=0, timeout=60
    )
    lines = [request_line(f"req-{i:03d}", "summarize", f"question {i}", max_tokens=8) for i in range(50)]
    uploaded = client.files.create(file=jsonl(lines), purpose="batch")
    created = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"provider_batch": "auto"},
    )
    native = OpenAIBatch.objects.get(pk=created.id).batch

    def ended() -> bool:
        return client.batches.retrieve(created.id).status in ("completed", "failed", "expired", "cancelled")

    wait_until(ended, timeout=90, interval=0.2, what="the /v1 batch to end")
    batch = client.batches.retrieve(created.id)
    assert batch.status == "completed" and batch.request_counts.completed == 50
    output = read_jsonl(client.files.content(batch.output_file_id).text)
    assert sorted(line["custom_id"] for line in output) == sorted(line["custom_id"] for line in lines)
    assert all(line["response"]["status_code"] == 200 for line in output)
    assert sum(sim.request_counts().get("oa", {}).values()) == 0  # 0 real-time calls
    assert ProviderBatch.objects.filter(batch=native).count() == 1
    assert_exactly_once([native], [sim])

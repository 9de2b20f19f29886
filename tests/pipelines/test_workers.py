"""Pipelines with real `celery -A gateway_site worker` processes, real PostgreSQL and Redis, and the
simulator enforcing the same RPM as the gateway: no barrier between steps (a document's summary is
sent while other documents are still being classified), every provider under its quota, every call
once, and a cancel that stops every step."""

from __future__ import annotations

from collections import Counter

import pytest

from batches import execution
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from batches.selectors import iter_results
from bench.common import peak_burst

from .conftest import (
    CLASSIFIERS,
    STEPS,
    SUMMARISERS,
    docs,
    make_pipeline_providers,
    queue_batch_steps,
    seen_once,
    sim_config,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RPM = 1200  # 20 requests/s per provider, at the gateway AND at the simulator
WORKER_ENV = {
    "GATEWAY_DISPATCHERS": 2,
    "GATEWAY_DISPATCH_SLICE_SECONDS": 10,
    "GATEWAY_CLAIM_LEASE_SECONDS": 10,
    "GATEWAY_GLOBAL_MAX_IN_FLIGHT": 64,
}


def limited_sim(rpm: int) -> dict:
    limits = {"rpm": rpm, "tpm": 100_000_000, "burst_seconds": 1.0, "sigma": 0.2}
    return sim_config(**{name: limits for name in (*CLASSIFIERS, *SUMMARISERS)})


def providers(sim, make_provider, make_route, rpm: int) -> None:
    # max_retries 0: a 429 would fail its item, it cannot hide behind a retry
    make_pipeline_providers(
        sim,
        make_provider,
        make_route,
        rpm=rpm,
        **{n: {"max_retries": 0} for n in (*CLASSIFIERS, *SUMMARISERS)},
    )


def ended(batch_id) -> bool:
    return Batch.objects.filter(id=batch_id, completed_at__isnull=False).exists()


def why(batch_id, w):
    def text() -> str:
        rows = BatchItem.objects.filter(batch_id=batch_id).values_list("step_index", "status")
        return f"{Counter(rows)}\n{w.logs()}"

    return text


@pytest.mark.timeout(240)
def test_two_step_pipeline_without_a_barrier(
    sim_server, make_provider, make_route, team, workers, redis_sync
):
    sim = sim_server(limited_sim(RPM))
    providers(sim, make_provider, make_route, RPM)
    w = workers(**WORKER_ENV)
    w.start("w1")
    w.start("w2")
    batch = queue_batch_steps(team, docs(200), STEPS)
    w.start_batch(batch.id)
    wait_for(lambda: ended(batch.id), 180, "the pipeline", why(batch.id, w))
    batch = Batch.objects.get(id=batch.id)
    assert batch.status == BatchStatus.COMPLETED and batch.completed_count == 200, why(batch.id, w)()
    results = list(iter_results(batch))
    assert all(r["ok"] and [s["name"] for s in r["steps"]] == ["classify", "summary"] for r in results)
    for r in results:  # the label chose the summary route
        assert r["provider"] == ("suma" if r["steps"][0]["provider"] == "clsa" else "sumb")
    trace = sim.trace()
    classify = sorted(row["arrival_s"] for row in trace if row["provider"] in CLASSIFIERS)
    summary = sorted(row["arrival_s"] for row in trace if row["provider"] in SUMMARISERS)
    assert len(classify) == len(summary) == 200
    # no barrier: the first summary request arrived before the last classification request
    overlap = sum(1 for a in classify if a > summary[0])
    print(f"\n{overlap} classification requests arrived after the first summary request")
    assert summary[0] < classify[-1] and overlap >= 20
    # every provider under its quota: no 429, never a burst above its bucket
    assert Counter(row["status"] for row in trace) == Counter({200: 400})
    for name in (*CLASSIFIERS, *SUMMARISERS):
        assert sim.provider_counters(name)["rate_limited_429"] == 0
        arrivals = [row["arrival_s"] for row in trace if row["provider"] == name]
        assert peak_burst(arrivals, RPM / 60.0) <= RPM / 60.0 + 1, name
    seen = seen_once(sim, results)  # every call once, on the provider its step names
    assert sum(sum(ids.values()) for ids in seen.values()) == 400
    assert {p: s["request_count"] for p, s in batch.stats["providers"].items()} == {
        p: sum(ids.values()) for p, ids in seen.items()
    }


@pytest.mark.timeout(240)
def test_cancel_stops_every_step(sim_server, make_provider, make_route, team, workers, redis_sync):
    slow = 300  # 5 requests/s per classifier: the batch runs for about 20 s
    sim = sim_server(limited_sim(slow))
    providers(sim, make_provider, make_route, slow)
    w = workers(**WORKER_ENV)
    w.start("w1")
    batch = queue_batch_steps(team, docs(200), STEPS)
    w.start_batch(batch.id)

    def summaries() -> int:
        return sum(sim.provider_counters(n)["accepted"] for n in SUMMARISERS)

    wait_for(lambda: summaries() >= 10, 60, "summaries to start", why(batch.id, w))
    execution.cancel_batch(str(batch.id))
    wait_for(lambda: ended(batch.id), 60, "the cancel", why(batch.id, w))
    batch = Batch.objects.get(id=batch.id)
    assert batch.status == BatchStatus.CANCELLED
    at_end = sim.request_counts()
    results = list(iter_results(batch))
    by_status = Counter(r["status"] for r in results)
    assert by_status["cancelled"] > 100 and by_status["succeeded"] >= 10, by_status
    assert set(by_status) <= {"succeeded", "cancelled"}
    assert batch.cancelled_count == by_status["cancelled"] and batch.completed_count == by_status["succeeded"]
    stopped_at = Counter(len(r["steps"]) for r in results if r["status"] == "cancelled")
    assert stopped_at[1] and stopped_at[2], (
        stopped_at
    )  # cancelled before its classification and before its summary
    for r in results:
        if r["status"] == "cancelled":  # the step it was waiting for was never sent
            assert r["steps"][-1]["error"]["type"] == "cancelled" and r["steps"][-1]["attempts"] == 0
            assert all(s["ok"] for s in r["steps"][:-1])
    assert not BatchItem.objects.filter(
        batch=batch, status__in=(ItemStatus.PENDING, ItemStatus.RUNNING)
    ).exists()
    seen_once(sim, results)
    w.stop()
    assert sim.request_counts() == at_end  # nothing was sent for the batch after it ended

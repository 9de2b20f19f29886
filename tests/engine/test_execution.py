"""Execution services on real PostgreSQL + Redis + a real local provider server (eager, one process)."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from django.db import connection
from django.db.models import F

from batches import execution
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus, TeamUsageDaily
from batches.submission import submit_batch
from tests import factories
from tests.factories import claim

from .provider_server import Reply, ok_reply

pytestmark = pytest.mark.django_db(transaction=True)


def q(cid, route=None, provider=None, **params):
    out = {"custom_id": cid, "query": f"question {cid}", "params": params}
    out["route" if route else "provider"] = route or provider
    return out


def make_batch(team, items) -> Batch:
    """tests.factories.make_batch, with each explicit provider as the item's queue (as submission does)."""
    batch = factories.make_batch(team, items)
    BatchItem.objects.filter(batch=batch).exclude(requested_provider="").update(
        queue_provider=F("requested_provider")
    )
    return batch


@pytest.fixture
def fast_retries(settings):
    settings.GATEWAY_RETRY_BASE_SECONDS = 0.02
    settings.GATEWAY_RETRY_CAP_SECONDS = 0.2


def test_eager_batch_end_to_end(
    provider_server,
    make_provider,
    make_route,
    team,
    redis_sync,
    fast_retries,
    django_capture_on_commit_callbacks,
    caplog,
):
    fa = make_provider("ex-a", base_url=provider_server.url("ex-a"), rpm=60_000, tpm=10**7, max_concurrency=8)
    fb = make_provider("ex-b", base_url=provider_server.url("ex-b"), rpm=60_000, tpm=10**7, max_concurrency=8)
    make_provider("ex-bad", base_url=provider_server.url("ex-bad"), rpm=60_000, tpm=10**7, max_retries=2)
    make_route("ex-route", fa, weight=1)
    make_route("ex-route", fb, weight=1)
    provider_server.behaviours["ex-bad"] = lambda n, r, a, b: (
        Reply(400)
        if r.startswith("x")
        else Reply(500, usage={"prompt_tokens": 4, "completion_tokens": 0, "total_tokens": 4})
    )
    provider_server.behaviours["ex-a"] = lambda n, r, a, b: ok_reply(0.005)
    items = [q(f"r{i}", route="ex-route", max_tokens=10) for i in range(60)]
    items += [q("x1", provider="ex-bad"), q("y1", provider="ex-bad")]
    caplog.set_level(logging.INFO, logger="batches.batchlog")
    with django_capture_on_commit_callbacks(execute=True):
        batch = submit_batch(team=team, items=items)
    batch.refresh_from_db()
    assert batch.status == BatchStatus.COMPLETED and batch.completed_at is not None
    assert (batch.completed_count, batch.failed_count, batch.cancelled_count) == (60, 2, 0)
    rows = {i.custom_id: i for i in BatchItem.objects.filter(batch=batch)}
    assert all(i.status in (ItemStatus.SUCCEEDED, ItemStatus.FAILED) for i in rows.values())
    assert all(i.claimed_by == "" and i.finished_at for i in rows.values())
    x1, y1 = rows["x1"], rows["y1"]
    assert (x1.attempts, x1.error_type, x1.error_status_code) == (1, "client_error", 400)
    assert (y1.attempts, y1.error_type, y1.error_status_code, y1.retry_extra_tokens) == (
        3,
        "server_error",
        500,
        12,
    )
    r0 = rows["r0"]
    assert r0.response["choices"][0]["message"]["content"] == "answer to r0"
    assert r0.total_tokens == r0.prompt_tokens + r0.completion_tokens > 0
    assert [e["used"] for e in r0.attempt_log] == [True]

    stats = batch.stats
    served = provider_server.by_provider()
    assert {n: p["request_count"] for n, p in stats["providers"].items()} == dict(served)
    assert served["ex-a"] + served["ex-b"] == 60 and min(served["ex-a"], served["ex-b"]) > 10
    assert (stats["task_total"], stats["success_count"], stats["failed_count"]) == (62, 60, 2)
    assert stats["providers"]["ex-bad"]["errors_by_class"] == {
        "quota_exhausted": 0,
        "overloaded": 0,
        "4xx": 1,
        "5xx": 3,
        "429": 0,
        "timeout": 0,
        "connection": 0,
        "invalid_response": 0,
    }
    assert stats["providers"]["ex-bad"]["retry_count"] == 2
    assert stats["token_usage"]["retry_extra_tokens"] == 12
    assert stats["token_usage"]["prompt_tokens"] == sum(i.prompt_tokens or 0 for i in rows.values())
    assert stats["total_elapsed_ms"] > 0

    usage = {u.provider: u for u in TeamUsageDaily.objects.filter(team=team)}
    assert (
        usage["ex-bad"].requests == 4
        and usage["ex-bad"].items_failed == 2
        and usage["ex-bad"].wasted_tokens == 12
    )
    assert usage["ex-a"].items_succeeded + usage["ex-b"].items_succeeded == 60
    assert usage["ex-a"].prompt_tokens == stats["providers"]["ex-a"]["prompt_tokens"] > 0

    # finalize is exactly once: a second call changes nothing
    assert execution.finalize_batch_if_done(str(batch.id)) is True
    assert TeamUsageDaily.objects.get(team=team, provider="ex-bad").requests == 4
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "batches.batchlog"]
    assert len(lines) == 1 and lines[0]["batch_id"] == str(batch.id) and lines[0]["status"] == "completed"


def test_claims_are_disjoint_and_expired_claims_come_back(make_provider, team):
    make_provider("cl")
    batch = make_batch(team, [q(f"c{i}", provider="cl") for i in range(40)])
    bid = str(batch.id)
    got: dict[str, list] = {}

    def take(owner):
        try:
            got[owner] = [i.id for i in execution.claim_queued("cl", [bid], 25, owner)]
        finally:
            connection.close()

    threads = [threading.Thread(target=take, args=(f"w{n}",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not set(got["w0"]) & set(got["w1"])
    assert len(got["w0"]) + len(got["w1"]) == 40
    assert execution.claim_queued("cl", [bid], 25, "w2") == []
    # w0 died: its claims expire, the reconciler gives them back and w2 takes them; w0's late results
    # are dropped
    BatchItem.objects.filter(claimed_by="w0").update(claim_expires_at="2000-01-01T00:00:00Z")
    assert execution.requeue_expired_claims() == [bid]
    retaken = execution.claim_queued("cl", [bid], 40, "w2")
    assert sorted(i.id for i in retaken) == sorted(got["w0"])
    from gateway_engine import ItemResult

    late = [(i, ItemResult(i.custom_id, "succeeded", provider="cl", attempts=1)) for i in retaken]
    assert execution.apply_results(bid, execution.as_served(late), owner="w0").written == 0
    assert execution.apply_results(bid, execution.as_served(late), owner="w2").written == len(late)
    assert Batch.objects.get(id=bid).completed_count == len(late)
    assert execution.finalize_batch_if_done(bid) is False  # w1's items are still running


def test_cancel_mid_run_in_flight_items_finish(provider_server, make_provider, team, redis_sync):
    make_provider("slowp", base_url=provider_server.url("slowp"), rpm=60_000, tpm=10**7, max_concurrency=2)
    provider_server.behaviours["slowp"] = lambda n, r, a, b: ok_reply(0.6)
    batch = make_batch(team, [q(f"s{i}", provider="slowp") for i in range(30)])
    bid = str(batch.id)
    execution.start_batch(bid)

    def run():
        try:
            execution.DispatchSlice(30).run()
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + 10
    while provider_server.count("slowp") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    cancelled = execution.cancel_batch(bid)
    assert cancelled.status == BatchStatus.CANCELLED
    runner.join(20)
    assert not runner.is_alive()
    batch.refresh_from_db()
    assert batch.status == BatchStatus.CANCELLED and batch.completed_at is not None
    sent = provider_server.count("slowp")
    assert 2 <= sent <= 8  # the ones in flight (and at most a second's worth more) finished
    assert batch.completed_count == sent and batch.cancelled_count == 30 - sent
    assert not BatchItem.objects.filter(batch=batch, status__in=["pending", "running"]).exists()
    assert (batch.stats["success_count"], batch.stats["failed_count"], batch.stats["task_total"]) == (
        sent,
        0,
        30,
    )
    assert execution.cancel_batch(bid).completed_at == batch.completed_at  # idempotent


def test_reconciler_requeues_dead_claims_and_ensures_dispatchers(make_provider, team, redis_sync):
    make_provider("rp")
    batch = make_batch(team, [q(f"p{i}", provider="rp") for i in range(5)])
    bid = str(batch.id)
    assert claim(bid, owner="dead-worker")
    ensured: list[int] = []
    report = execution.reconcile(lambda: ensured.append(1))
    assert report["requeued"] == [] and ensured == []  # claims still valid, nothing queued
    BatchItem.objects.filter(batch=batch).update(claim_expires_at="2000-01-01T00:00:00Z")
    report = execution.reconcile(lambda: ensured.append(1))
    assert report["requeued"] == [bid] and ensured == [1]
    rows = BatchItem.objects.filter(batch=batch)
    assert {(r.status, r.claimed_by, r.claim_expires_at) for r in rows} == {(ItemStatus.PENDING, "", None)}
    assert execution.reconcile(lambda: ensured.append(1))["requeued"] == []  # nothing left to requeue


def test_concurrent_finalize_happens_once(make_provider, team, caplog):
    make_provider("fin")
    batch = make_batch(team, [q(f"f{i}", provider="fin") for i in range(20)])
    bid = str(batch.id)
    items = claim(bid, owner="w")
    from gateway_engine import ItemResult

    log_entry = {
        "provider": "fin",
        "status_code": 200,
        "error_type": "",
        "latency_ms": 5,
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "tokens": 7,
        "used": True,
        "at": "x",
    }
    results = [
        (
            i,
            ItemResult(
                i.custom_id,
                "succeeded",
                provider="fin",
                attempts=1,
                prompt_tokens=3,
                completion_tokens=4,
                total_tokens=7,
                attempt_log=[log_entry],
            ),
        )
        for i in items
    ]
    assert execution.apply_results(bid, execution.as_served(results), owner="w").written == 20
    caplog.set_level(logging.INFO, logger="batches.batchlog")
    outcomes = []
    barrier = threading.Barrier(4)

    def finalize():
        try:
            barrier.wait()
            outcomes.append(execution.finalize_batch_if_done(bid))
        finally:
            connection.close()

    threads = [threading.Thread(target=finalize) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == [True] * 4
    usage = TeamUsageDaily.objects.get(team=team, provider="fin")
    assert (usage.requests, usage.items_succeeded, usage.prompt_tokens, usage.completion_tokens) == (
        20,
        20,
        60,
        80,
    )
    assert len([r for r in caplog.records if r.name == "batches.batchlog"]) == 1
    batch.refresh_from_db()
    assert batch.status == "completed" and batch.stats["providers"]["fin"]["request_count"] == 20

"""Priority lanes, aging and deadlines through the real dispatcher (single process: one dispatcher
thread), real PostgreSQL and Redis, and a real local provider server. Assertions are on the order in
which the provider saw requests, never on wall-clock time."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from batches import execution
from batches.execution import keepalive
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from gateway_engine.retry import ErrorType
from tests.engine.provider_server import Reply, ok_reply

from .conftest import q, queue_batch, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_buffers(settings):
    settings.GATEWAY_DISPATCH_LOOKAHEAD_SECONDS = 0.5
    settings.GATEWAY_DISPATCH_SLICE_SECONDS = 30


def served_order(provider_server, provider: str) -> list[str]:
    return [h.request_id for h in provider_server.hits if h.provider == provider]


def test_high_batch_submitted_later_is_served_before_the_rest_of_a_low_one(
    provider_server, make_provider, team, redis_sync, small_buffers, settings
):
    settings.GATEWAY_PRIORITY_AGING_SECONDS = 0  # this test is about lanes only
    provider_server.behaviours["prio"] = lambda n, r, a, b: ok_reply(0.01)
    make_provider("prio", base_url=provider_server.url("prio"), rpm=600, burst_seconds=1, max_concurrency=2)
    low = queue_batch(team, [q(f"L{i:03d}", "prio") for i in range(40)], priority="low")
    execution.ensure_local_dispatcher(background=True)
    try:
        wait_for(lambda: provider_server.count("prio") >= 5, 30, "the low batch to start")
        high = queue_batch(team, [q(f"H{i:03d}", "prio") for i in range(15)], priority="high")
        wait_for(
            lambda: Batch.objects.filter(id__in=[low.id, high.id], completed_at__isnull=False).count() == 2,
            60,
            "both batches to finish",
        )
    finally:
        wait_for(lambda: not keepalive._local_state["running"], 60, "the dispatcher thread to end")
    order = served_order(provider_server, "prio")
    assert sorted(order) == sorted([f"L{i:03d}" for i in range(40)] + [f"H{i:03d}" for i in range(15)])
    first_h = next(i for i, r in enumerate(order) if r.startswith("H"))
    last_h = max(i for i, r in enumerate(order) if r.startswith("H"))
    lows_among_highs = sum(1 for r in order[first_h:last_h] if r.startswith("L"))
    # only low items claimed before the high batch appeared (the buffer: max(2, 10/s × 0.5 s) = 5)
    assert lows_among_highs <= 5, order
    assert sum(1 for r in order[last_h:] if r.startswith("L")) >= 15, order  # low was still waiting
    assert Batch.objects.get(id=high.id).status == BatchStatus.COMPLETED


@pytest.mark.parametrize("aging_seconds, first", [(0, "H"), (1, "L")])
def test_aging_lets_a_waiting_low_batch_through(
    provider_server, make_provider, team, redis_sync, small_buffers, settings, aging_seconds, first
):
    settings.GATEWAY_PRIORITY_AGING_SECONDS = aging_seconds
    name = f"aging{aging_seconds}"
    provider_server.behaviours[name] = lambda n, r, a, b: ok_reply(0.005)
    make_provider(name, base_url=provider_server.url(name), rpm=1200, burst_seconds=1, max_concurrency=2)
    low = queue_batch(team, [q(f"L{i:03d}", name) for i in range(20)], priority="low")
    # the low batch has waited 5 s: with 1 s aging it is in the high lane, and was submitted first
    Batch.objects.filter(id=low.id).update(created_at=timezone.now() - timedelta(seconds=5))
    queue_batch(team, [q(f"H{i:03d}", name) for i in range(20)], priority="high")
    execution.ensure_local_dispatcher(background=False)
    order = served_order(provider_server, name)
    assert len(order) == 40
    # the favoured batch's 20 items go first (a couple may race with the other batch's first claims)
    assert Counter(r[0] for r in order[:18]) == {first: 18}, order


def test_deadline_expires_unsent_items_and_items_waiting_in_backoff(
    provider_server, make_provider, team, redis_sync, small_buffers
):
    provider_server.behaviours["dl"] = lambda n, r, a, b: ok_reply(0.005)
    provider_server.behaviours["dl-429"] = lambda n, r, a, b: Reply(429, headers={"Retry-After": "30"})
    make_provider("dl", base_url=provider_server.url("dl"), rpm=60, burst_seconds=2, max_concurrency=1)
    make_provider("dl-429", base_url=provider_server.url("dl-429"), rpm=6000, burst_seconds=1)
    items = [q(f"d{i:02d}", "dl") for i in range(20)] + [q("r0", "dl-429")]
    batch = queue_batch(team, items, window=timedelta(seconds=3))
    execution.ensure_local_dispatcher(background=False)

    batch.refresh_from_db()
    rows = {r.custom_id: r for r in BatchItem.objects.filter(batch=batch)}
    sent = {h.request_id for h in provider_server.hits if h.provider == "dl"}
    succeeded = {c for c, r in rows.items() if r.status == ItemStatus.SUCCEEDED}
    expired = {c for c, r in rows.items() if r.status == ItemStatus.EXPIRED}
    assert batch.status == BatchStatus.EXPIRED and batch.completed_at is not None
    # the provider serves ~1/s: a few were sent and recorded normally, the rest expired unsent
    assert 1 <= len(succeeded) <= 8 and succeeded == sent
    assert provider_server.count("dl") == len(sent)  # nothing sent twice
    assert expired == set(rows) - succeeded
    for cid in expired - {"r0"}:
        r = rows[cid]
        assert (r.attempts, r.error_type, r.attempt_log) == (0, ErrorType.EXPIRED, []), cid
    # the 429 item was waiting out Retry-After: 30 when the deadline passed; its attempt stays recorded
    r0 = rows["r0"]
    assert (r0.status, r0.error_type, r0.attempts) == (ItemStatus.EXPIRED, ErrorType.EXPIRED, 1)
    assert [e["status_code"] for e in r0.attempt_log] == [429]
    assert provider_server.count("dl-429") == 1
    assert (batch.completed_count, batch.expired_count, batch.failed_count) == (
        len(succeeded),
        len(expired),
        0,
    )
    assert all(r.claimed_by == "" for r in rows.values())


def test_cancel_wins_over_expired(make_provider, team, redis_sync):
    make_provider("cx")
    batch = queue_batch(team, [q(f"c{i}", "cx") for i in range(3)], window=timedelta(seconds=10))
    Batch.objects.filter(id=batch.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert execution.expire_unsent(str(batch.id)) == 3
    Batch.objects.filter(id=batch.id).update(status=BatchStatus.CANCELLED)
    assert execution.finalize_batch_if_done(str(batch.id))
    assert Batch.objects.get(id=batch.id).status == BatchStatus.CANCELLED


def test_items_queued_for_a_deleted_provider_are_not_stranded(make_provider, team, redis_sync):
    gone = make_provider("gone")
    batch = queue_batch(team, [q(f"g{i}", "gone") for i in range(3)])
    assert set(BatchItem.objects.filter(batch=batch).values_list("queue_provider", flat=True)) == {"gone"}
    gone.delete()
    execution.ensure_local_dispatcher(background=False)  # returns: nothing left queued
    batch.refresh_from_db()
    assert batch.status == BatchStatus.FAILED and batch.completed_at is not None
    errors = set(BatchItem.objects.filter(batch=batch).values_list("status", "error_type"))
    assert errors == {(ItemStatus.FAILED, ErrorType.NO_PROVIDER)}

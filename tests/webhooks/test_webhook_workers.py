"""Webhooks with real `celery -A gateway_site worker` processes (default prefork pool, two children;
one worker start for the module), real PostgreSQL and Redis, the simulator, and a real local receiver
(tests/webhooks/receiver.py) with GATEWAY_WEBHOOK_ALLOW_PRIVATE on (issue #26, "Must show").

What the receiver saw is the evidence: per batch end exactly one request it answered 2xx, every request
of one event with the same webhook-id, each signature verified with the `standardwebhooks` package
and the team's secret; a receiver answering 500 twice gets the event on the third attempt; a worker
child killed -9 while the attempt is in flight still delivers (the claim lease runs out, the same
webhook-id comes again)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from batches import submission
from batches.models import Batch
from sim.testing import run_simulator_in_thread
from tests.exactly_once import assert_exactly_once
from tests.waiting import wait_until
from tests.workers import (
    ROOT,
    delete_queue,
    pool_children,
    send_start_batch,
    start_worker,
    stop_worker,
    test_queue,
    worker_env,
)
from webhooks import services
from webhooks.models import DeliveryAttempt, EventState, WebhookEvent

from .receiver import Receiver

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SIM = {
    "time_scale": 1,
    "seed": 26,
    "providers": {
        "alpha": {"model": "alpha-m", "rpm": 6000, "tpm": 10_000_000, "median_ms": 5, "sigma": 0.1},
        "broken": {"model": "broken-m", "rpm": 6000, "tpm": 10_000_000, "fixed_status": 400},
    },
}
WORKER = {
    "GATEWAY_WEBHOOK_ALLOW_PRIVATE": "1",
    "GATEWAY_WEBHOOK_RETRY_BASE_SECONDS": "0.3",  # the retries of the 500 test come quickly
    "GATEWAY_WEBHOOK_TIMEOUT_SECONDS": "2",  # and the kill test's lease (timeout + 5 s) is short
    "GATEWAY_CLAIM_LEASE_SECONDS": "3",  # a reconciler pass every second
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("webhooks")
    receiver = Receiver()
    queue = test_queue("hooks")
    log_path = tmp / "worker.log"
    with run_simulator_in_thread(SIM) as sim:
        proc = start_worker("hooks", queue, log_path, **WORKER)
        try:
            yield {"sim": sim, "receiver": receiver, "queue": queue, "proc": proc, "log": log_path}
        finally:
            stop_worker(proc)
            delete_queue(queue)
            receiver.close()


@pytest.fixture
def gateway(stack, team, make_provider, settings):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = True  # submission in this process
    sim = stack["sim"]
    sim.reset()
    for name in ("alpha", "broken"):
        make_provider(name, base_url=sim.provider_url(name), model=f"{name}-m", rpm=6000, tpm=10_000_000,
                      max_concurrency=8, max_retries=0, timeout_seconds=10)  # fmt: skip
    return stack


def submit(team, provider: str, url: str, n: int = 2, **opts) -> Batch:
    """Store a batch through the submission service without starting it."""
    items = [{"custom_id": f"{provider}-{i}", "provider": provider, "query": f"q{i}", "params": {"max_tokens": 4}}
             for i in range(n)]  # fmt: skip
    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = lambda batch_id: None
    try:
        return submission.submit_batch(
            team=team, items=items, options=submission.BatchOptions(webhook_url=url, **opts)
        )
    finally:
        submission.enqueue.enqueue_start = saved


def cancel_in_another_process(batch: Batch, queue: str) -> None:
    """`manage.py cancel_batch` as an operator runs it, its Celery tasks sent to the workers' queue."""
    import subprocess
    import sys

    env = worker_env(queue)
    done = subprocess.run([sys.executable, "manage.py", "cancel_batch", str(batch.pk)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def wait_acked(stack, batch: Batch, timeout: float = 30.0) -> None:
    receiver = stack["receiver"]

    def delivered() -> bool:  # the receiver answered 2xx and the worker has recorded it
        return (
            bool(receiver.acked(batch.pk))
            and WebhookEvent.objects.filter(batch=batch, state=EventState.DELIVERED).exists()
        )

    wait_until(delivered, timeout, 0.05, what=f"the webhook of batch {batch.pk}",
               on_fail=lambda: Path(stack["log"]).read_text()[-3000:])  # fmt: skip


def verify_all(stack, batch: Batch, secret: str, event_type: str) -> list:
    """Every request of the batch's event: one webhook-id, a valid signature, the contract's body."""
    seen = stack["receiver"].for_batch(batch.pk)
    event = WebhookEvent.objects.get(batch=batch)
    assert {r.webhook_id for r in seen} == {event.id}
    for r in seen:
        doc = Webhook(secret).verify(r.body, r.headers)
        assert doc == {"object": "event", "id": event.id, "type": event_type, "created_at": doc["created_at"],
                       "data": {"id": str(batch.pk)}}  # fmt: skip
    return seen


def test_every_batch_end_is_delivered_once_signed(gateway, team):
    receiver, queue = gateway["receiver"], gateway["queue"]
    secret = services.ensure_team_webhook(team.pk)[0].secret
    url = receiver.url("/ok")
    # cancelled before anything runs: a running dispatcher claims any queued item of its provider, so a
    # batch cancelled after the others started could complete first (a race seen in CI)
    cancelled = submit(team, "alpha", url)
    cancel_in_another_process(cancelled, queue)
    completed, failed = submit(team, "alpha", url), submit(team, "broken", url)
    for b in (completed, failed):
        send_start_batch(b.pk, queue)
    expired = submit(team, "alpha", url)
    Batch.objects.filter(pk=expired.pk).update(expires_at=timezone.now())  # the reconciler expires it
    ends = {"batch.completed": completed, "batch.failed": failed, "batch.expired": expired,
            "batch.cancelled": cancelled}  # fmt: skip
    for event_type, batch in ends.items():
        wait_acked(gateway, batch)
        batch.refresh_from_db()
        assert f"batch.{batch.status}" == event_type
        verify_all(gateway, batch, secret, event_type)
        assert len(receiver.acked(batch.pk)) == 1
        assert WebhookEvent.objects.get(batch=batch).state == EventState.DELIVERED
    assert WebhookEvent.objects.count() == 4
    assert_exactly_once([b.pk for b in ends.values()], [gateway["sim"]])


def test_a_receiver_that_answers_500_twice_gets_the_event_on_the_third_attempt(gateway, team):
    receiver = gateway["receiver"]
    secret = services.ensure_team_webhook(team.pk)[0].secret
    batch = submit(team, "alpha", receiver.url("/fail/2/x"))
    send_start_batch(batch.pk, gateway["queue"])
    wait_acked(gateway, batch)
    seen = verify_all(gateway, batch, secret, "batch.completed")
    assert [r.status for r in seen] == [500, 500, 200]
    event = WebhookEvent.objects.get(batch=batch)
    assert event.state == EventState.DELIVERED and event.attempts == 3
    assert list(DeliveryAttempt.objects.filter(event=event).values_list("status_code", flat=True)) == [
        500,
        500,
        200,
    ]
    assert_exactly_once([batch.pk], [gateway["sim"]])


def test_a_rotated_secret_and_the_previous_one_both_verify_a_delivery(gateway, team):
    receiver = gateway["receiver"]
    old = services.ensure_team_webhook(team.pk)[0].secret
    new = services.rotate_secret(team.pk).secret
    batch = submit(team, "alpha", receiver.url("/ok"))
    send_start_batch(batch.pk, gateway["queue"])
    wait_acked(gateway, batch)
    (got,) = receiver.acked(batch.pk)
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(got.body, got.headers)["data"]["id"] == str(batch.pk)
    assert Webhook(old).verify(got.body, got.headers)["data"]["id"] == str(batch.pk)
    assert_exactly_once([batch.pk], [gateway["sim"]])


def test_a_worker_killed_during_the_attempt_still_delivers_with_the_same_webhook_id(gateway, team):
    receiver, proc = gateway["receiver"], gateway["proc"]
    secret = services.ensure_team_webhook(team.pk)[0].secret
    receiver.released.clear()
    batch = submit(team, "alpha", receiver.url("/hang/x"))
    send_start_batch(batch.pk, gateway["queue"])
    wait_until(lambda: receiver.for_batch(batch.pk), 30, 0.02, what="the first (held) attempt")
    for pid in pool_children(proc):  # the child sending the attempt dies with it, unrecorded
        os.kill(pid, signal.SIGKILL)
    wait_acked(gateway, batch, timeout=60)  # the claim lease (timeout + 5 s) passes, a new child retries
    receiver.release()
    seen = verify_all(gateway, batch, secret, "batch.completed")
    assert [r.status for r in seen] == [None, 200]  # the held one never got an answer
    event = WebhookEvent.objects.get(batch=batch)
    assert event.state == EventState.DELIVERED
    assert len(receiver.acked(batch.pk)) == 1
    assert json.loads(seen[0].body) == json.loads(seen[1].body)
    assert_exactly_once([batch.pk], [gateway["sim"]])

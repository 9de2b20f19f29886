"""Warm shutdown re-sends nothing (issue #28): SIGTERM to a default-pool worker in the middle of a batch
— to its process group, as `make down`, systemd or a test's stop do, or to its main process alone, as
`docker stop` does — stops its claims, lets its calls in flight answer and stores them, releases the
rest at once, and the worker exits within GATEWAY_SHUTDOWN_SECONDS. The other worker finishes the
batch and no provider request is repeated.

Before the fix the pool children died on SIGTERM with their calls in flight (Celery resets SIGTERM to
its default in every child): their items were sent again by the next claimer."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from batches.models import Batch, BatchStatus
from tests.engine.provider_server import Reply, ok_reply
from tests.exactly_once import assert_exactly_once

from .conftest import q, queue_batch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SHUTDOWN_SECONDS = 10
WORKER_ENV = {
    "GATEWAY_DISPATCHERS": 4,
    "GATEWAY_DISPATCH_SLICE_SECONDS": 60,  # the SIGTERM lands inside running slices
    "GATEWAY_CLAIM_LEASE_SECONDS": 30,  # a repeat would need a lost claim: none may be lost
    "GATEWAY_SHUTDOWN_SECONDS": SHUTDOWN_SECONDS,
    "GATEWAY_RETRY_BASE_SECONDS": 0.05,
    "GATEWAY_RETRY_CAP_SECONDS": 0.2,
}
ITEMS = 200
RETRIED = {f"s{i:03d}" for i in range(0, 40, 4)}  # their first answer is a 429 (Retry-After: 3)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "target, first_answer",
    [
        ("process-group", "ok"),
        ("main-process", "ok"),
        ("process-group", "429-retry-after"),  # items wait 3 s to retry when the SIGTERM lands
    ],
)
def test_sigterm_mid_batch_repeats_no_provider_request(
    provider_server, make_provider, team, workers, redis_sync, target, first_answer
):
    def behaviour(name, rid, attempt, body):
        if first_answer == "429-retry-after" and attempt == 1 and rid in RETRIED:
            return Reply(429, 0.01, headers={"Retry-After": "3"})
        return ok_reply(0.3)

    provider_server.behaviours["stopp"] = behaviour
    make_provider(
        "stopp", base_url=provider_server.url("stopp"), rpm=60_000, burst_seconds=1, max_concurrency=8
    )
    w = workers(**WORKER_ENV)
    victim = w.start("w1")
    batch = queue_batch(team, [q(f"s{i:03d}", "stopp") for i in range(ITEMS)])
    w.start_batch(batch.id)
    wait_for(lambda: provider_server.count("stopp") >= 40, 60, "the batch to be under way", w.logs)
    w.start("w2")  # the survivor, started late so that w1 holds claims and calls in flight
    if target == "process-group":
        os.killpg(victim.pid, signal.SIGTERM)
    else:
        os.kill(victim.pid, signal.SIGTERM)
    signalled = time.monotonic()
    try:
        code = victim.wait(SHUTDOWN_SECONDS + 20)  # the bound plus start-up and Celery's own exit
    except subprocess.TimeoutExpired:
        pytest.fail(f"w1 did not exit within {SHUTDOWN_SECONDS + 20} s of SIGTERM\n{w.logs()}")
    assert code == 0, w.logs()
    print(f"\nSIGTERM ({target}) → exit in {time.monotonic() - signalled:.1f} s")
    wait_for(
        lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(),
        120,
        "the survivor to finish the batch",
        w.logs,
    )
    w.stop()
    batch.refresh_from_db()
    assert batch.status == BatchStatus.COMPLETED, w.logs()
    summary = assert_exactly_once([batch], [provider_server])
    retried = len(RETRIED) if first_answer == "429-retry-after" else 0  # a 429, then the success
    assert summary["requests"] == ITEMS + retried, summary
    assert summary["duplicates"] == retried, summary  # nothing repeated
    log = (w.tmp_path / "w1.log").read_text(errors="replace")
    assert "no new claims; calls in flight finish" in log  # the worker said what it does
    assert "still in flight after" not in log

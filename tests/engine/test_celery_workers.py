"""Two real `celery -A gateway_site worker` processes share one 2,000-item batch; one is killed -9."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
from django.utils import timezone

from batches.models import Batch, BatchItem, ItemStatus
from tests.waiting import wait_until
from tests.workers import delete_queue, send_start_batch, start_worker, stop_worker, test_queue

from .provider_server import ok_reply
from .test_execution import make_batch, q

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
IN_FLIGHT_CAP = 16


WORKER_ENV = {
    "GATEWAY_CLAIM_LEASE_SECONDS": "3",
    "GATEWAY_CHUNK_SIZE": "100",
    "GATEWAY_GLOBAL_MAX_IN_FLIGHT": str(IN_FLIGHT_CAP),
}


def stats_ms(batch) -> int:
    return batch.stats.get("total_elapsed_ms", 0)


@pytest.mark.timeout(240)
def test_two_workers_one_killed_batch_completes_exactly_once(
    provider_server, make_provider, team, redis_sync, tmp_path
):
    provider_server.behaviours["fastp"] = lambda n, r, a, b: ok_reply(0.02)
    make_provider(
        "fastp",
        base_url=provider_server.url("fastp"),
        rpm=1_000_000,
        tpm=10**9,
        max_concurrency=32,
        burst_seconds=1,
        timeout_seconds=5,
    )
    batch = make_batch(team, [q(f"k{i:04d}", provider="fastp", max_tokens=8) for i in range(2000)])
    bid = str(batch.id)
    queue = test_queue("engine")
    workers = {n: start_worker(n, queue, tmp_path / f"{n}.log", **WORKER_ENV) for n in ("w1", "w2")}
    try:
        send_start_batch(bid, queue)
        wait_until(
            lambda: provider_server.count("fastp") >= 500,
            120,
            what="500 provider calls",
            on_fail=lambda: (tmp_path / "w1.log").read_text(),
        )
        # kill -9 the worker that holds claims right now
        owners = Counter(
            BatchItem.objects.filter(batch_id=bid, status=ItemStatus.RUNNING).values_list(
                "claimed_by", flat=True
            )
        )
        pids = {int(o.split(":")[1]) for o in owners}
        victim_name = next(n for n, p in workers.items() if p.pid in pids)
        victim = workers[victim_name]
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        claims = BatchItem.objects.filter(
            batch_id=bid, status=ItemStatus.RUNNING, claimed_by__contains=f":{victim.pid}:"
        ).values_list("custom_id", "claim_expires_at")
        # nobody else may send a victim's item before its claim expires (renewed every lease / 3, so
        # about 2 s away): a call for it that reached the server before then came from the victim
        now, wall = time.monotonic(), timezone.now()
        reclaimable_at = {cid: now + (expires - wall).total_seconds() for cid, expires in claims}
        victim_claims = set(reclaimable_at)

        def finished() -> bool:
            batch.refresh_from_db()
            return batch.completed_at is not None

        survivor_log = tmp_path / f"{'w2' if victim_name == 'w1' else 'w1'}.log"
        wait_until(
            finished, 120, 0.25, what="the batch to finish", on_fail=lambda: survivor_log.read_text()[-3000:]
        )
    finally:
        for proc in workers.values():
            stop_worker(proc)
        delete_queue(queue)

    assert batch.status == "completed"
    statuses = Counter(BatchItem.objects.filter(batch_id=bid).values_list("status", flat=True))
    assert statuses == {ItemStatus.SUCCEEDED: 2000}
    assert (batch.completed_count, batch.failed_count) == (2000, 0)
    per_item = Counter(h.request_id for h in provider_server.hits)
    assert set(per_item) == {f"k{i:04d}" for i in range(2000)}
    # calls the victim had sent but not recorded: its in-flight calls at the kill
    in_flight_at_kill = {
        rid for rid, at in reclaimable_at.items() if any(hit.at < at for hit in provider_server.hits_for(rid))
    }
    assert len(in_flight_at_kill) <= IN_FLIGHT_CAP
    duplicates = {rid: n - 1 for rid, n in per_item.items() if n > 1}
    # only the killed worker's in-flight calls were repeated, each at most once
    assert set(duplicates) <= in_flight_at_kill
    assert sum(duplicates.values()) <= len(in_flight_at_kill) <= IN_FLIGHT_CAP
    print(
        f"\nkilled {victim_name} holding {len(victim_claims)} claims, {len(in_flight_at_kill)} calls in flight; "
        f"{sum(duplicates.values())} duplicate provider calls; batch took {stats_ms(batch)} ms"
    )
    # stats count every recorded attempt: the server saw exactly those plus the lost in-flight ones
    stats = batch.stats
    assert stats["success_count"] == 2000
    assert stats["providers"]["fastp"]["request_count"] == provider_server.count("fastp") - sum(
        duplicates.values()
    )
    assert Batch.objects.filter(id=bid, completed_at=batch.completed_at).count() == 1

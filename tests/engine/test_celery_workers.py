"""Two real `celery -A gateway_site worker` processes (default prefork pool) share one 2,000-item batch;
one pool child, or one whole worker, is killed -9."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
from django.db.models import Q
from django.utils import timezone

from batches.models import Batch, BatchItem, ItemStatus
from tests.exactly_once import assert_exactly_once, counts_since
from tests.waiting import wait_until
from tests.workers import (
    delete_queue,
    parent_pid,
    pool_children,
    send_start_batch,
    start_worker,
    stop_worker,
    test_queue,
)

from .provider_server import ok_reply
from .test_execution import make_batch, q

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
IN_FLIGHT_CAP = 16


WORKER_ENV = {
    # 6 s (renewed every 2 s): a renewal late under load must not let a live worker's claim expire
    "GATEWAY_CLAIM_LEASE_SECONDS": "6",
    "GATEWAY_CHUNK_SIZE": "100",
    "GATEWAY_GLOBAL_MAX_IN_FLIGHT": str(IN_FLIGHT_CAP),
}


def stats_ms(batch) -> int:
    return batch.stats.get("total_elapsed_ms", 0)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kill", ["pool-child", "worker-group"])
def test_two_workers_one_killed_batch_completes_exactly_once(
    provider_server, make_provider, team, redis_sync, tmp_path, kill
):
    """Two default-pool workers (prefork, two children each) share a 2,000-item batch; mid-batch one
    of them is killed -9: either one pool child that holds claims (its master replaces it) or the
    whole worker (master and children, the process group). A killed process's in-flight calls may
    repeat, and every repeat is counted: the attempt journal folds them into the item's attempts and
    the provider's request_count ("outcome unknown (worker died)")."""
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
    seen = counts_since(provider_server)
    workers = {n: start_worker(n, queue, tmp_path / f"{n}.log", **WORKER_ENV) for n in ("w1", "w2")}
    try:
        send_start_batch(bid, queue)
        wait_until(
            lambda: provider_server.count("fastp") >= 500,
            120,
            what="500 provider calls",
            on_fail=lambda: (tmp_path / "w1.log").read_text(),
        )
        # kill -9 a process that holds claims right now (claimed_by = host:pid:…: the pool child's pid)
        owners = Counter(
            BatchItem.objects.filter(batch_id=bid, status=ItemStatus.RUNNING).values_list(
                "claimed_by", flat=True
            )
        )
        child = next(int(o.split(":")[1]) for o, _ in owners.most_common())
        victim_name = next(n for n, p in workers.items() if parent_pid(child) == p.pid)
        victim = workers[victim_name]
        if kill == "pool-child":
            killed = [child]
            os.kill(child, signal.SIGKILL)
        else:
            killed = pool_children(victim)
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(10)
        held = Q()
        for pid in killed:
            held |= Q(claimed_by__contains=f":{pid}:")
        claims = (
            BatchItem.objects.filter(batch_id=bid, status=ItemStatus.RUNNING)
            .filter(held)
            .values_list("custom_id", "claim_expires_at")
        )
        # nobody else may send a victim's item before its claim expires (renewed every lease / 3, so
        # at most a lease away): a call for it that reached the server before then came from the victim
        now, wall = time.monotonic(), timezone.now()
        reclaimable_at = {cid: now + (expires - wall).total_seconds() for cid, expires in claims}
        victim_claims = set(reclaimable_at)

        def finished() -> bool:
            batch.refresh_from_db()
            return batch.completed_at is not None

        logs = lambda: "\n".join(p.read_text()[-3000:] for p in tmp_path.glob("*.log"))  # noqa: E731
        wait_until(finished, 120, 0.25, what="the batch to finish", on_fail=logs)
        if kill == "pool-child":  # the master lives on and replaces its child (reaped, a new pid)
            assert victim.poll() is None
            wait_until(
                lambda: child not in pool_children(victim) and len(pool_children(victim)) == 2,
                30,
                what="the master to replace its killed child",
                on_fail=lambda: str(pool_children(victim)),
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
    assert len(in_flight_at_kill) <= IN_FLIGHT_CAP * len(killed)  # the cap is per process
    duplicates = {rid: n - 1 for rid, n in per_item.items() if n > 1}
    # only the killed process's in-flight calls were repeated, each at most once
    assert set(duplicates) <= in_flight_at_kill
    assert sum(duplicates.values()) <= len(in_flight_at_kill)
    # ... and each repeat is in the record: attempts per item and request_count = what the server saw,
    # except that a victim's in-flight call the server never read (the kill reset the connection before
    # the server read the request) is in the record as one more attempt, "outcome unknown"
    summary = assert_exactly_once([bid], [seen], may_be_unseen=victim_claims)
    unknown = [
        e
        for log in BatchItem.objects.filter(batch_id=bid, attempts__gt=1).values_list(
            "attempt_log", flat=True
        )
        for e in log
        if e.get("error_type") == "outcome_unknown"
    ]
    # every unknown outcome is a repeat the server saw or a call it never read; nothing else
    assert len(unknown) == sum(duplicates.values()) + summary["unseen"]
    assert all(e["detail"] == "outcome unknown (worker died)" for e in unknown)
    assert summary["unseen"] <= len(victim_claims)
    assert (
        batch.stats["providers"]["fastp"]["request_count"]
        == 2000 + sum(duplicates.values()) + summary["unseen"]
    )
    print(
        f"\nkilled {kill} of {victim_name} holding {len(victim_claims)} claims, {len(in_flight_at_kill)} "
        f"calls in flight; {summary['duplicates']} repeated calls, all counted; {summary['unseen']} sent but "
        f"never read by the server, counted; batch took {stats_ms(batch)} ms"
    )
    assert Batch.objects.filter(id=bid, completed_at=batch.completed_at).count() == 1

"""Failure isolation: one provider answering garbage (200 + an HTML page: ``invalid_response``, a
breaker failure, retried) with its breaker open never slows down another provider's work.

Two real workers (default prefork pool, two children each, four dispatchers), short slices (5 s) so
slice ends happen while the broken provider's items wait out its breaker and their backoffs. Batches for
a healthy provider (the simulator, traced) are submitted at several moments — just after the breaker
opened, around a slice end, after a failed half-open probe (re-opened), and later while the poisoned
items back off. For each, what the gateway added on top of the provider's own work — (finish − submit)
minus (its last request's end − its first request's arrival, on the simulator's clock) — must be ≤ 2 s.
Well-formed items for the broken provider itself (content "normal": the broken server answers them
normally) must all succeed within the breaker's longest cooldown of their submission, not after every
poisoned item.

Before the fix (commit edd14c4): a slice that ended kept running until every item it held had
finished, including sent items sleeping out the breaker (up to GATEWAY_MAX_BREAKER_WAIT_SECONDS) or a
backoff; while it drained it claimed nothing, and dispatchers that started together drained together:
the healthy batch submitted after a failed probe took 35.7 s (provider time 0.05 s). The well-formed
items queued behind poisoned items that sat in the provider's workers waiting for the breaker, and
probes went to whichever item asked first: with max_concurrency 4, 4 of 5 were still unsent after
125 s.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from batches.models import Batch, BatchItem, ItemStatus
from providers.shared_breaker import breaker_snapshot_sync
from sim.testing import sim_server  # noqa: F401  (fixture)
from tests.engine.test_celery_workers import WORKER_ENV as KILL_TEST_WORKER_ENV
from tests.exactly_once import assert_exactly_once, counts_since
from tests.factories import make_batch
from tests.waiting import wait_until
from tests.workers import delete_queue, send_start_batch, start_worker, stop_worker, test_queue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BROKEN = "html"  # the broken server's mode: 200 with an HTML page
HEALTHY = "healthy"
OVERHEAD_LIMIT_S = 2.0
POISON_ITEMS = 40
BREAKER_WAIT_S = 40
MAX_COOLDOWN_S = 60.0  # gateway_engine.breaker.BreakerConfig.max_cooldown_seconds (5 s doubling)


def batch_for(team, provider: str, prefix: str, content: str, n: int) -> Batch:
    rows = [
        {
            "custom_id": f"{prefix}-{i:02d}",
            "provider": provider,
            "query": f"{content}" if content else f"{prefix}-{i}",
        }
        for i in range(n)
    ]
    for row in rows:
        row["params"] = {"max_tokens": 8}
    batch = make_batch(team, rows)
    # queued for its provider, as the submission service does (the preferred provider)
    BatchItem.objects.filter(batch=batch).update(queue_provider=provider)
    return batch


def ended(batch: Batch) -> bool:
    batch.refresh_from_db()
    return batch.completed_at is not None


def breaker(provider: str) -> dict:
    return breaker_snapshot_sync([provider])[provider]


@pytest.fixture
def workers(tmp_path):
    queue = test_queue("isolation")
    env = {
        **KILL_TEST_WORKER_ENV,
        "GATEWAY_DISPATCH_SLICE_SECONDS": "5",
        "GATEWAY_MAX_BREAKER_WAIT_SECONDS": str(BREAKER_WAIT_S),
    }
    procs = [start_worker(n, queue, tmp_path / f"{n}.log", **env) for n in ("w1", "w2")]
    try:
        yield queue, tmp_path
    finally:
        for proc in procs:
            stop_worker(proc)
        delete_queue(queue)


@pytest.mark.timeout(300)
def test_a_broken_provider_never_delays_another_providers_batch(
    broken,
    sim_server,  # noqa: F811
    make_provider,
    team,
    redis_sync,
    workers,
):
    queue, logdir = workers
    sim = sim_server(
        {
            "trace_tag_regex": r"^(h\d+)-",
            "providers": {HEALTHY: {"rpm": 600_000, "median_ms": 40, "sigma": 0.1, "max_concurrency": 100}},
        }
    )
    make_provider(HEALTHY, base_url=sim.provider_url(HEALTHY), rpm=60_000, tpm=10**8, max_concurrency=20,
                  burst_seconds=1, timeout_seconds=10, max_retries=2)  # fmt: skip
    make_provider(BROKEN, base_url=broken.url(BROKEN), rpm=600, tpm=10**7, max_concurrency=16,
                  burst_seconds=2, timeout_seconds=10, max_retries=2)  # fmt: skip
    seen = counts_since(broken)
    logs = lambda: "\n".join(p.read_text()[-3000:] for p in logdir.glob("*.log"))  # noqa: E731

    poisoned = batch_for(team, BROKEN, "p", "", POISON_ITEMS)
    send_start_batch(poisoned.id, queue)
    t0 = time.monotonic()
    wait_until(
        lambda: breaker(BROKEN)["state"] != "closed",
        60,
        0.05,
        what="the broken provider's breaker to open",
        on_fail=logs,
    )

    # the broken provider's own well-formed items, submitted while its breaker is open
    normal = batch_for(team, BROKEN, "n", "normal", 5)
    send_start_batch(normal.id, queue)

    moments = [
        ("breaker open", lambda: True),
        ("around the first slice end", lambda: time.monotonic() - t0 >= 5.5),
        ("after a failed probe (re-opened)", lambda: breaker(BROKEN)["opened_count"] >= 2 or ended(poisoned)),
        ("poisoned items backing off", lambda: time.monotonic() - t0 >= 14),
        ("a later slice end", lambda: time.monotonic() - t0 >= 21),
    ]
    healthy: list[tuple[str, Batch, dict]] = []
    for k, (moment, condition) in enumerate(moments):
        wait_until(condition, 90, 0.05, what=moment, on_fail=logs)
        state = breaker(BROKEN)
        batch = batch_for(team, HEALTHY, f"h{k}", "", 5)
        send_start_batch(batch.id, queue)
        wait_until(lambda b=batch: ended(b), 90, 0.1, what=f"healthy batch {k} ({moment})", on_fail=logs)
        healthy.append((moment, batch, state))

    trace = sim.trace()
    overheads = []
    for k, (moment, batch, state) in enumerate(healthy):
        rows = [r for r in trace if r["tag"] == f"h{k}"]
        assert len(rows) == 5, (moment, rows)
        provider_time = max(r["done_s"] for r in rows) - min(r["arrival_s"] for r in rows)
        total = (batch.completed_at - batch.created_at).total_seconds()
        overheads.append((moment, state["state"], round(total, 2), round(provider_time, 2)))
        assert batch.status == "completed" and batch.completed_count == 5
    print("healthy batches (moment, broken breaker, submit→finish s, provider s):", overheads)
    slow = [o for o in overheads if o[2] - o[3] > OVERHEAD_LIMIT_S]
    assert not slow, f"healthy batches waited on the broken provider: {slow}"

    def states() -> str:
        rows = BatchItem.objects.filter(batch__in=[poisoned, normal]).values_list(
            "custom_id", "status", "attempts"
        )
        return f"{sorted(rows)}\n{logs()}"

    wait_until(lambda: ended(normal), 120, 0.25, what="the well-formed batch", on_fail=states)
    # the broken provider's own well-formed items were not starved behind the poisoned ones
    items = list(BatchItem.objects.filter(batch=normal))
    assert Counter(i.status for i in items) == {ItemStatus.SUCCEEDED: 5}, [
        (i.custom_id, i.status, i.error_message) for i in items
    ]
    waited = max((i.finished_at - normal.created_at).total_seconds() for i in items)
    print(f"well-formed items for the broken provider done {waited:.1f} s after submission")
    assert waited <= MAX_COOLDOWN_S + OVERHEAD_LIMIT_S, f"well-formed items took {waited:.1f} s"

    wait_until(lambda: ended(poisoned), 150, 0.25, what="the poisoned batch", on_fail=states)
    assert_exactly_once([poisoned, normal, *(b for _, b, _ in healthy)], [sim, seen])
    for row in BatchItem.objects.filter(batch=poisoned):
        assert row.status == ItemStatus.FAILED and row.claimed_by == ""
        assert row.attempts <= 3, (row.custom_id, row.attempts)  # max_retries + 1, across claims

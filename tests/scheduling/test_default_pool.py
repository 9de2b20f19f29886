"""Every item sent once in the deployment users run: `celery -A gateway_site worker` with Celery's
default prefork pool (two children each, tests.workers.DEFAULT_POOL), two workers, short dispatcher
slices, and the simulator counting every request per custom id.

Before the fix (issue #19) all children of one worker shared one claim owner, so a slice that ended
released the items its sibling had in flight; they were claimed and sent again, and the first answers
were dropped without being counted: a 3-item batch drew 6–21 requests while its stats said 3.
"""

from __future__ import annotations

import re

import pytest

from batches.models import Batch, BatchStatus
from tests.exactly_once import assert_exactly_once

from .conftest import q, queue_batch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLICE_ENDED = re.compile(r"dispatcher slice ended: owner=(\S+) claimed=(\d+)")
WORKER_ENV = {
    "GATEWAY_DISPATCH_SLICE_SECONDS": 1,
    "GATEWAY_DISPATCHERS": 2,
    "GATEWAY_CLAIM_LEASE_SECONDS": 10,
}


def slices_that_claimed(w) -> dict[str, int]:
    """Slice owner → items it claimed, from every worker's log (one line per slice end)."""
    found: dict[str, int] = {}
    for path in w.tmp_path.glob("*.log"):
        for owner, claimed in SLICE_ENDED.findall(path.read_text(errors="replace")):
            if int(claimed):
                found[owner] = int(claimed)
    return found


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "items, rpm, burst, latency_ms",
    [
        (3, 30, 2, 1500),  # one item every 2 s, each in flight 1.5 s: every 1 s slice ends mid-call
        (300, 3000, 1, 400),  # 50 a second for 6 s
    ],
    ids=["3-items", "300-items"],
)
def test_default_pool_sends_every_item_once_across_slice_ends(
    sim_server, make_provider, team, workers, redis_sync, items, rpm, burst, latency_ms
):
    sim = sim_server({"seed": 7, "providers": {"slicep": {"median_ms": latency_ms}}})
    make_provider(
        "slicep", base_url=sim.provider_url("slicep"), rpm=rpm, burst_seconds=burst, max_concurrency=40
    )
    w = workers(loglevel="INFO", DJANGO_LOG_LEVEL="INFO", **WORKER_ENV)  # INFO: the slice-end lines
    w.start("w1")
    w.start("w2")
    batch = queue_batch(team, [q(f"c{i:04d}", "slicep", max_tokens=8) for i in range(items)])
    w.start_batch(batch.id)
    wait_for(
        lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(),
        180,
        "the batch to finish",
        w.logs,
    )
    w.stop()
    batch.refresh_from_db()
    assert batch.status == BatchStatus.COMPLETED, w.logs()
    summary = assert_exactly_once([batch.id], [sim])
    assert summary["requests"] == items and summary["duplicates"] == 0, summary
    assert batch.stats["providers"]["slicep"]["request_count"] == items
    slices = slices_that_claimed(w)
    assert len(slices) >= 3, f"the batch must span at least 3 slices, got {slices}\n{w.logs()}"
    assert "no longer claimed" not in w.logs()  # no answer was thrown away

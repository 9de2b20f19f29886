"""A result PostgreSQL refuses never fails its neighbours' write nor makes its item run again: the
rows are written one by one and the refused one is stored as its item's invalid_response (#13).

Pre-fix: the one-statement write raised DataError for the whole group; the chunk aborted, its claims
expired, the reaper re-ran every item of the group (re-billing the provider), forever."""

from __future__ import annotations

import pytest

from batches.execution import apply_results, as_served
from batches.models import Batch, BatchItem, ItemStatus
from gateway_engine import ItemResult
from tests.factories import claim, make_batch
from tests.factories import work_item as q

pytestmark = pytest.mark.django_db

OWNER = "test-writer"


def ok(custom_id: str, response, tokens: int = 5) -> ItemResult:
    return ItemResult(
        custom_id,
        "succeeded",
        provider="p",
        attempts=1,
        latency_ms=3,
        response=response,
        prompt_tokens=tokens,
        completion_tokens=1,
        total_tokens=tokens + 1,
        attempt_log=[{"provider": "p", "status_code": 200, "error_type": "", "used": True}],
    )


POISON = {
    "nul": ok("nul", {"content": "a\x00b"}),
    "surrogate": ok("surrogate", {"content": "x\ud800y"}),
    "nan": ok("nan", {"score": float("nan")}),
    "beyond_bigint": ok("beyond_bigint", {"content": "h"}, tokens=10**20),
    "nul_message": ItemResult("nul_message", "failed", error_type="server_error", error_message="bad\x00"),
}


@pytest.mark.parametrize("group_size", [1, 3, 11])
def test_poison_rows_become_invalid_response_and_neighbours_are_stored(team, group_size):
    names = list(POISON)
    good = [f"good{i}" for i in range(group_size)]
    batch = make_batch(team, [q(c, provider="p") for c in good + names])
    items = {i.custom_id: i for i in claim(str(batch.id), owner=OWNER)}
    entries = [(items[c], ok(c, {"content": f"fine {c}"})) for c in good]
    entries += [(items[c], POISON[c]) for c in names]
    entries.sort(key=lambda e: e[0].seq)  # poison in the middle of good rows too
    written = apply_results(str(batch.id), as_served(entries), owner=OWNER).written

    assert written == len(entries)  # every row written exactly once
    rows = {i.custom_id: i for i in BatchItem.objects.filter(batch=batch)}
    for c in good:
        assert (rows[c].status, rows[c].response) == (ItemStatus.SUCCEEDED, {"content": f"fine {c}"})
    for c in names:
        assert rows[c].status == ItemStatus.FAILED, c
        assert rows[c].error_type == "invalid_response", c
        assert rows[c].error_message.startswith("the provider's answer could not be stored"), c
        assert rows[c].response is None and rows[c].claimed_by == ""
    batch = Batch.objects.get(id=batch.id)
    assert (batch.completed_count, batch.failed_count) == (group_size, len(names))
    assert not BatchItem.objects.filter(batch=batch, status=ItemStatus.RUNNING).exists()


def test_bigint_token_counts_are_stored(team):
    """Token columns are bigint: 3·10^9 tokens (clamped answers can sum past int4) is stored as is."""
    batch = make_batch(team, [q("big", provider="p")])
    (item,) = claim(str(batch.id), owner=OWNER)
    apply_results(str(batch.id), as_served([(item, ok("big", {"c": 1}, tokens=3 * 10**9))]), owner=OWNER)
    item.refresh_from_db()
    assert (item.status, item.prompt_tokens) == (ItemStatus.SUCCEEDED, 3 * 10**9)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("group_size", [2, 600])  # one statement, and several statements in one transaction
def test_poison_rows_in_autocommit_mode(team, group_size):
    """As in a worker: no surrounding transaction (one statement), or WRITE_BATCH_ROWS slices."""
    from django.db import connection

    assert not connection.in_atomic_block
    good = [f"good{i}" for i in range(group_size)]
    batch = make_batch(team, [q(c, provider="p") for c in good + ["nul", "nan"]])
    items = {i.custom_id: i for i in claim(str(batch.id), owner=OWNER)}
    entries = [(items[c], ok(c, {"content": c})) for c in good]
    entries.insert(1, (items["nul"], POISON["nul"]))
    entries.append((items["nan"], POISON["nan"]))
    assert apply_results(str(batch.id), as_served(entries), owner=OWNER).written == group_size + 2
    statuses = dict(BatchItem.objects.filter(batch=batch).values_list("custom_id", "error_type"))
    assert statuses["nul"] == statuses["nan"] == "invalid_response"
    assert sum(1 for c in good if statuses[c] == "") == group_size
    batch = Batch.objects.get(id=batch.id)
    assert (batch.completed_count, batch.failed_count) == (group_size, 2)

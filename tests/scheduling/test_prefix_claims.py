"""Prefix grouping in the claim (batches/execution/claims.py ``claim_queued(..., prefix=)``), on the real
database: whole groups of a batch's pending items, the current group first, a group in flight before a new
one; ``prefix=None`` (grouping off) claims in seq order; batches are still taken in the given order."""

from __future__ import annotations

import pytest

from batches.execution.claims import claim_queued
from batches.models import BatchItem, ItemStatus
from batches.scheduling.prefix import MIN_PREFIX_CHARS

from .conftest import queue_batch

pytestmark = pytest.mark.django_db


def items(tag: str, n: int, groups: int = 3) -> list[dict]:
    return [
        {"custom_id": f"{tag}{i:02d}", "provider": "alpha",
         "messages": [{"role": "system", "content": f"{i % groups}" * MIN_PREFIX_CHARS},
                      {"role": "user", "content": f"q{i}"}]}
        for i in range(n)
    ]  # fmt: skip


def key_of(batch, seq: int) -> str:
    return BatchItem.objects.get(batch=batch, seq=seq).prefix_key


def seqs(rows) -> list[int]:
    return [r.seq for r in rows]


def test_whole_groups_current_first_then_in_flight_then_lowest_seq(team, make_provider):
    make_provider("alpha")
    batch = queue_batch(team, items("a", 12))  # groups by seq % 3
    k0, k1, k2 = (key_of(batch, s) for s in range(3))
    assert len({k0, k1, k2}) == 3
    got = claim_queued("alpha", [str(batch.id)], 5, "owner-1", prefix="")
    assert seqs(got) == [0, 3, 6, 9, 1]  # group of seq 0 whole, then the group of the lowest pending seq
    got = claim_queued("alpha", [str(batch.id)], 2, "owner-2", prefix=k2)
    assert seqs(got) == [2, 5]  # the current group first
    got = claim_queued("alpha", [str(batch.id)], 4, "owner-3", prefix="")
    assert seqs(got) == [4, 7, 10, 8]  # k1 is in flight (seq 1 running): joined before k2's rest


def test_grouping_off_claims_in_seq_order_and_batches_keep_their_order(team, make_provider):
    make_provider("alpha")
    first, second = queue_batch(team, items("f", 4)), queue_batch(team, items("s", 6))
    got = claim_queued("alpha", [str(second.id), str(first.id)], 8, "owner-1", prefix=None)
    assert [(str(r.batch_id), r.seq) for r in got] == [(str(second.id), s) for s in range(6)] + [
        (str(first.id), 0), (str(first.id), 1)
    ]  # fmt: skip
    got = claim_queued("alpha", [str(first.id)], 10, "owner-2", prefix="")
    assert seqs(got) == [3, 2]  # what is left: seq 3 joins its group in flight (seq 0), then seq 2
    assert not BatchItem.objects.filter(status=ItemStatus.PENDING).exists()


@pytest.mark.django_db(transaction=True)
def test_a_group_whose_rows_another_claim_holds_is_skipped_not_retried_forever(team, make_provider):
    """Every pending row of the current group is locked by another transaction (a concurrent claim): the
    claim moves on to the other groups and returns. (It once looped forever on such a group, re-querying
    the database at 100 % CPU in a worker child.)"""
    import threading

    from django.db import connection, transaction

    make_provider("alpha")
    batch = queue_batch(team, items("l", 6, groups=2))  # group A: seqs 0, 2, 4; group B: 1, 3, 5
    k0 = key_of(batch, 0)
    locked, release = threading.Event(), threading.Event()

    def hold_group_a():
        try:
            with transaction.atomic():
                list(BatchItem.objects.select_for_update(no_key=True).filter(batch=batch, prefix_key=k0))
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_group_a)
    holder.start()
    try:
        assert locked.wait(30)
        got: list = []
        worker = threading.Thread(
            target=lambda: (got.extend(claim_queued("alpha", [str(batch.id)], 6, "owner-1", prefix=k0)),
                            connection.close()),
            daemon=True,
        )  # fmt: skip
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), "claim_queued did not return while a group's rows were locked"
        assert seqs(got) == [1, 3, 5]  # the free group; the locked one skipped
    finally:
        release.set()
        holder.join(30)

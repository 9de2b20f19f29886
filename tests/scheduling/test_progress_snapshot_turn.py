"""Progress snapshots: one process of the cluster per batch per PROGRESS_SNAPSHOT_SECONDS, through the
shared Redis (batches/execution/finalize.py ``_snapshot_turn``). Before, every dispatcher process took
its own, each reading every finished item of the batch; here a second process is this one with its
per-process throttle forgotten."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from batches.execution import finalize
from batches.models import Batch
from gateway_site.redis import sync_redis

from .conftest import q, queue_batch

pytestmark = pytest.mark.django_db


def other_process() -> None:
    finalize._last_snapshot.clear()


def test_one_snapshot_per_interval_in_the_cluster(team, make_provider):
    make_provider("alpha")
    batch = queue_batch(team, [q("s1", "alpha"), q("s2", "alpha")])
    bid = str(batch.id)
    with sync_redis() as client:
        client.delete(f"{settings.GATEWAY_REDIS_PREFIX}snapshot:{bid}")
    assert finalize.snapshot_progress(bid) is True
    assert Batch.objects.get(id=bid).stats["task_total"] == 2
    other_process()
    assert finalize.snapshot_progress(bid) is False  # another process had this interval's turn
    assert finalize.snapshot_progress(bid, force=True) is True  # forced: always
    with sync_redis() as client:
        ttl = client.pttl(f"{settings.GATEWAY_REDIS_PREFIX}snapshot:{bid}")
    assert 0 < ttl <= finalize.PROGRESS_SNAPSHOT_SECONDS * 1000


@override_settings(GATEWAY_QUOTA_BACKEND="local")
def test_single_process_mode_needs_no_turn(team, make_provider):
    make_provider("alpha")
    batch = queue_batch(team, [q("t1", "alpha")])
    bid = str(batch.id)
    assert finalize.snapshot_progress(bid) is True
    other_process()
    assert finalize.snapshot_progress(bid) is True

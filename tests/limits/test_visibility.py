"""Queue visibility: the providers page's queued items by provider, team and lane; a batch's place and
ETA on its page (the approximation of docs/quota.md, computed by hand here)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from dashboard.selectors import queues
from teams.services import create_team

pytestmark = pytest.mark.django_db


def make(team, priority: str, n: int, provider: str = "alpha", age_s: int = 0, done: int = 0) -> Batch:
    batch = Batch.objects.create(
        team=team, total_count=n + done, priority=priority, status=BatchStatus.RUNNING
    )
    Batch.objects.filter(pk=batch.pk).update(created_at=timezone.now() - dt.timedelta(seconds=age_s))
    batch.refresh_from_db()
    BatchItem.objects.bulk_create(
        BatchItem(
            batch=batch, seq=i, custom_id=f"c{i}", queue_provider=provider,
            payload={"messages": [{"role": "user", "content": "x"}], "params": {}},
            status=ItemStatus.PENDING if i < n else ItemStatus.SUCCEEDED,
        )
        for i in range(n + done)
    )  # fmt: skip
    return batch


@pytest.fixture
def scene(make_provider):
    make_provider("alpha", rpm=120)  # 2/s
    make_provider("beta", rpm=60)
    acme = create_team("acme")[0]
    globex = create_team("globex")[0]
    globex.weight = 2
    globex.save()
    initech = create_team("initech")[0]
    make(acme, "normal", 10, age_s=100)
    make(acme, "high", 5, age_s=1)
    target = make(acme, "normal", 20, age_s=50, done=3)
    newer_normal = make(acme, "normal", 7, age_s=10)  # same lane, newer: behind
    low_old = make(acme, "low", 9, age_s=500)  # lower lane: behind
    make(globex, "normal", 1000, age_s=5)  # weight 2: 2 × (15 + 20) = 70 ahead
    make(initech, "low", 4, age_s=5)  # weight 1: min(4, 35) = 4 ahead
    make(initech, "normal", 6, provider="beta")  # another provider: not counted for alpha
    return {"target": target, "acme": acme, "newer": newer_normal, "low": low_old}


def test_batch_place_follows_lanes_age_and_weights(scene):
    target = scene["target"]
    place = queues.batch_place(target)
    assert len(place) == 1
    p = place[0]
    assert (p.provider, p.pending, p.ahead_same_team) == ("alpha", 20, 10 + 5)
    assert p.ahead_other_teams == 70 + 4
    assert p.rpm == 120 and p.eta_seconds == pytest.approx((15 + 74 + 20) / 2.0)
    # the low-lane batch waits for every normal and high item of its team, whatever its age
    low = queues.batch_place(scene["low"])[0]
    assert low.ahead_same_team == 10 + 5 + 20 + 7
    # a finished batch has no place
    Batch.objects.filter(pk=target.pk).update(status=BatchStatus.COMPLETED, completed_at=timezone.now())
    target.refresh_from_db()
    assert queues.batch_place(target) == []


def test_queued_items_by_provider_team_and_lane(scene):
    rows = {(r.provider, r.team, r.priority): r.pending for r in queues.queued_items_by_provider()}
    assert rows == {
        ("alpha", "acme", "high"): 5,
        ("alpha", "acme", "normal"): 10 + 20 + 7,
        ("alpha", "acme", "low"): 9,
        ("alpha", "globex", "normal"): 1000,
        ("alpha", "initech", "low"): 4,
        ("beta", "initech", "normal"): 6,
    }


def test_pages_show_queues_and_place(scene, client):
    user = get_user_model().objects.create_user("ops", password="pw-123456789", is_staff=True)
    client.force_login(user)
    page = client.get("/dashboard/providers/").content.decode()
    assert "Queued items by provider, team and lane" in page and "1,000" in page
    detail = client.get(f"/dashboard/batches/{scene['target'].pk}/").content.decode()
    assert "Place in the provider queues" in detail
    assert "~55 s" in detail  # (15 + 74 + 20) items at 2/s = 54.5 s

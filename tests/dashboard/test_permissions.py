"""Staff powers are permissions (issue #29): is_staff alone sees the aggregate pages; reading prompts and
answers, retrying and cancelling need the permissions the "gateway operator" group holds, and each such
action is in the config history with its actor. Before: every staff account could read every team's
prompts and answers and retry (spending that team's budget)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from audit.models import ConfigChange
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from tests.factories import make_batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(team, make_provider, monkeypatch):
    make_provider("x")
    from batches import submission

    monkeypatch.setattr(
        submission.enqueue, "enqueue_start", lambda batch_id: None
    )  # the retry is only stored
    batch = make_batch(
        team, [{"custom_id": f"p{i}", "provider": "x", "query": "secret prompt"} for i in range(2)]
    )
    BatchItem.objects.filter(batch=batch).update(status=ItemStatus.FAILED, error_type="server_error")
    Batch.objects.filter(id=batch.id).update(
        status=BatchStatus.FAILED, failed_count=2, completed_at="2026-01-01T00:00:00Z"
    )
    return Batch.objects.get(id=batch.id)


@pytest.fixture
def running(team):
    batch = make_batch(team, [{"custom_id": "r0", "provider": "x", "query": "q"}])
    Batch.objects.filter(id=batch.id).update(status=BatchStatus.RUNNING)
    return batch


def test_the_operator_group_exists_with_the_permissions():
    perms = set(Group.objects.get(name="gateway operator").permissions.values_list("codename", flat=True))
    assert {"view_content", "retry_batch", "cancel_batch", "change_team", "change_provider"} <= perms


def test_staff_alone_sees_aggregates_but_no_prompts_and_cannot_retry_or_cancel(
    client, aggregate_only_staff, finished, running
):
    client.force_login(aggregate_only_staff)
    assert client.get("/dashboard/").status_code == 200
    page = client.get(f"/dashboard/batches/{finished.id}/")
    assert page.status_code == 200 and b"Retry failed" not in page.content
    item = BatchItem.objects.filter(batch=finished).first()
    denied = client.get(f"/dashboard/items/{item.pk}/")
    assert denied.status_code == 403
    assert b"secret prompt" not in denied.content
    assert client.post(f"/dashboard/batches/{finished.id}/retry-failed").status_code == 403
    assert client.post(f"/dashboard/batches/{running.id}/cancel").status_code == 403
    assert Batch.objects.count() == 2  # nothing retried
    assert Batch.objects.get(id=running.id).status == BatchStatus.RUNNING


def test_an_operator_can_and_every_action_is_in_the_history(client, staff_user, finished, running):
    client.force_login(staff_user)
    item = BatchItem.objects.filter(batch=finished).first()
    assert b"secret prompt" in client.get(f"/dashboard/items/{item.pk}/").content
    assert client.post(f"/dashboard/batches/{finished.id}/retry-failed").status_code == 302
    assert (
        Batch.objects.filter(metadata__retry_of=str(finished.id)).count() == 1 or Batch.objects.count() == 3
    )
    assert client.post(f"/dashboard/batches/{running.id}/cancel").status_code == 302
    assert Batch.objects.get(id=running.id).status == BatchStatus.CANCELLED
    history = list(
        ConfigChange.objects.filter(model="batch").values_list("actor", "via", "action", "object_id")
    )
    assert ("ops", "dashboard", "viewed", str(finished.id)) in history
    assert ("ops", "dashboard", "retried", str(finished.id)) in history
    assert ("ops", "dashboard", "cancelled", str(running.id)) in history


def test_a_missing_operator_group_is_made_again_by_migrate_and_an_existing_one_is_left_alone():
    """A flushed database (``manage.py flush``, transactional tests) or a deleted group: post_migrate makes
    it again with its default permissions; an operator's edits to an existing group stay."""
    from django.core.management.sql import emit_post_migrate_signal
    from django.db import connection

    from batches.operators import OPERATOR_GROUP, ensure_operator_group

    Group.objects.filter(name=OPERATOR_GROUP).delete()
    emit_post_migrate_signal(verbosity=0, interactive=False, db=connection.alias)
    group = Group.objects.get(name=OPERATOR_GROUP)
    perms = set(group.permissions.values_list("content_type__app_label", "codename"))
    assert {("batches", "view_content"), ("batches", "cancel_batch"), ("teams", "change_team"),
            ("providers", "change_provider")} <= perms  # fmt: skip
    group.permissions.remove(*group.permissions.filter(codename="retry_batch"))
    assert ensure_operator_group() is False
    assert not group.permissions.filter(codename="retry_batch").exists()

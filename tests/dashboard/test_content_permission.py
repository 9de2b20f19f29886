"""A batch's content on the staff pages needs the content permission (least privilege, second pass): a
staff user in no group sees aggregates only on the batch and failures pages — no custom_id, no metadata,
no webhook URL (often a bearer secret) — and cannot redeliver the webhook (403); an operator can.
Before: every staff user saw all three and could POST a redelivery."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from tests.factories import make_batch
from webhooks.models import EventState, WebhookEvent

pytestmark = pytest.mark.django_db

HOOK = "https://hooks.example.test/in/tok-4f1c9e2b7a"


@pytest.fixture
def finished(team, make_provider):
    make_provider("x")
    batch = make_batch(
        team,
        [{"custom_id": f"acme-invoice-{i}", "provider": "x", "query": "q"} for i in range(2)],
        metadata={"project": "acme-secret-project"},
    )
    BatchItem.objects.filter(batch=batch).update(status=ItemStatus.FAILED, error_type="server_error")
    Batch.objects.filter(id=batch.id).update(
        status=BatchStatus.FAILED, failed_count=2, completed_at="2026-01-01T00:00:00Z"
    )
    far = timezone.now() + dt.timedelta(days=1)
    WebhookEvent.objects.create(
        id="evt_keys_1", batch=batch, team=team, type="batch.failed", url=HOOK, body="{}",
        state=EventState.FAILED, give_up_at=far,
    )  # fmt: skip
    return Batch.objects.get(id=batch.id)


def _shows_content(body: bytes) -> list[str]:
    return [s for s in ("acme-invoice-0", "acme-secret-project", "tok-4f1c9e2b7a") if s.encode() in body]


def test_plain_staff_sees_no_content_and_cannot_redeliver(client, aggregate_only_staff, finished):
    client.force_login(aggregate_only_staff)
    page = client.get(f"/dashboard/batches/{finished.id}/")
    assert page.status_code == 200 and b"Redeliver" not in page.content
    assert _shows_content(page.content) == []
    failures = client.get("/dashboard/failures/", {"window": "all"})
    assert failures.status_code == 200 and _shows_content(failures.content) == []
    refused = client.post(f"/dashboard/batches/{finished.id}/webhook/redeliver")
    assert refused.status_code == 403
    assert WebhookEvent.objects.get(pk="evt_keys_1").state == EventState.FAILED  # not made due again


def test_an_operator_sees_the_content_and_can_redeliver(client, staff_user, finished, monkeypatch):
    from webhooks import services

    monkeypatch.setattr(services, "kick", lambda: None)
    client.force_login(staff_user)
    page = client.get(f"/dashboard/batches/{finished.id}/")
    assert _shows_content(page.content) == ["acme-invoice-0", "acme-secret-project", "tok-4f1c9e2b7a"]
    assert b"acme-invoice-0" in client.get("/dashboard/failures/", {"window": "all"}).content
    assert client.post(f"/dashboard/batches/{finished.id}/webhook/redeliver").status_code == 302
    assert WebhookEvent.objects.get(pk="evt_keys_1").state == EventState.PENDING

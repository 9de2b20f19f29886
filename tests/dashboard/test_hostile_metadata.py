"""Team-set metadata is data (#29): every staff page (dashboard and admin) of a batch whose metadata holds
hostile values — wrong types, non-UUIDs, another team's batch id, markup, huge strings, non-object
metadata — answers 200 with the values escaped, and a retry link appears only for the gateway's own retry.

Before the fix, `{"retry_of": "not-a-uuid"}` (accepted by POST /api/v1/batches) made the staff batch page
a 500 (NoReverseMatch from `{% url … batch.metadata.retry_of %}`)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.db.models import JSONField, Value
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from gateway_engine.retry import ErrorType
from teams.services import create_api_key, create_team
from tests.factories import make_batch, work_item

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('metadata')</script>"
IMG = '<img src=x onerror="alert(1)">'
HUGE = "x" * 200_000 + SCRIPT

# markup must never reach a page unescaped
FORBIDDEN = ("<script>alert(", "<img src=x", "<b>key</b>", "</code><i>")


def _hostile(other_batch_id: str, own_id_placeholder: str = "SELF") -> list:
    return [
        {"retry_of": "not-a-uuid"},
        {"retry_of": 12345},
        {"retry_of": 1.5e300},
        {"retry_of": True},
        {"retry_of": None},
        {"retry_of": ["a", {"b": None}]},
        {"retry_of": {"id": str(uuid.uuid4())}},
        {"retry_of": SCRIPT},
        {"retry_of": str(uuid.uuid4())},  # a UUID naming no batch
        {"retry_of": other_batch_id},  # another team's batch
        {"retry_of": own_id_placeholder},  # the batch itself
        {"retry_of": " " + other_batch_id.upper() + " "},
        {"retry_of": HUGE, "note": IMG, "<b>key</b>": "v", "nested": {"a": [1, 2, {"c": "</code><i>"}]}},
        {"job": SCRIPT, "gateway_origin": IMG, "bidi": "\u202eevil\u202c", "nul-ish": "\\u0000"},
        [SCRIPT, {"retry_of": "x"}],
        SCRIPT,
        42,
        False,
        "JSON_NULL",
    ]


@pytest.fixture
def hostile(db):
    team, _ = create_team("acme")
    other, _ = create_team("globex")
    other_batch = make_batch(other, [work_item("o1", route="intent")])
    batches = []
    for metadata in _hostile(str(other_batch.pk)):
        batch = make_batch(team, [work_item("a", route="intent"), work_item("b", route="intent")])
        if metadata == "JSON_NULL":
            Batch.objects.filter(pk=batch.pk).update(metadata=Value(None, JSONField()))
        else:
            if isinstance(metadata, dict) and metadata.get("retry_of") == "SELF":
                metadata = {"retry_of": str(batch.pk)}
            Batch.objects.filter(pk=batch.pk).update(metadata=metadata)
        BatchItem.objects.filter(batch=batch, custom_id="b").update(
            status=ItemStatus.FAILED,
            error_type=ErrorType.SERVER_ERROR,
            error_status_code=500,
            error_message="boom",
            provider="alpha",
            finished_at=timezone.now(),
        )
        Batch.objects.filter(pk=batch.pk).update(
            status=BatchStatus.COMPLETED, failed_count=1, completed_count=1, completed_at=timezone.now()
        )
        batches.append(Batch.objects.get(pk=batch.pk))
    return team, other_batch, batches


def staff_pages(batch: Batch) -> dict[str, str]:
    failed = BatchItem.objects.get(batch=batch, custom_id="b")
    return {
        "list": reverse("dashboard:batches"),
        "list_team": reverse("dashboard:batches") + f"?team={batch.team_id}",
        "detail": reverse("dashboard:batch_detail", args=[batch.pk]),
        "detail_all": reverse("dashboard:batch_detail", args=[batch.pk]) + "?items=",
        "cancel_confirm": reverse("dashboard:batch_cancel", args=[batch.pk]),
        "item": reverse("dashboard:item_detail", args=[failed.pk]),
        "failures": reverse("dashboard:failures") + f"?batch={batch.pk}&window=all",
        "admin_list": reverse("admin:batches_batch_changelist"),
        "admin_search": reverse("admin:batches_batch_changelist") + f"?q={batch.pk}",
        "admin_change": reverse("admin:batches_batch_change", args=[batch.pk]),
        "admin_items": reverse("admin:batches_batchitem_changelist") + f"?batch__id__exact={batch.pk}",
        "admin_item": reverse("admin:batches_batchitem_change", args=[failed.pk]),
    }


def test_every_staff_page_of_a_batch_with_hostile_metadata_is_200_and_escaped(client, hostile):
    _, other_batch, batches = hostile
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123456")
    client.force_login(admin)
    problems = []
    for n, batch in enumerate(batches):
        for name, url in staff_pages(batch).items():
            response = client.get(url)
            if response.status_code != 200:
                problems.append(f"metadata #{n} {name}: HTTP {response.status_code}")
                continue
            html = response.content.decode()
            problems += [f"metadata #{n} {name}: unescaped {bad!r}" for bad in FORBIDDEN if bad in html]
            if name == "detail":
                # no retry link is built from team-set values: not to another team's batch, not to itself
                if reverse("dashboard:batch_detail", args=[other_batch.pk]) in html:
                    problems.append(f"metadata #{n} detail: links another team's batch")
                if "retry of" in html:
                    problems.append(f"metadata #{n} detail: shows a retry link")
    assert problems == []


def test_markup_in_metadata_is_shown_escaped(client, hostile):
    _, _, batches = hostile
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123456")
    client.force_login(admin)
    shown = next(b for b in batches if isinstance(b.metadata, dict) and b.metadata.get("job") == SCRIPT)
    html = client.get(reverse("dashboard:batch_detail", args=[shown.pk])).content.decode()
    assert "&lt;script&gt;alert(" in html and "<script>alert(" not in html


def test_the_gateways_own_retry_link_still_shows(client, hostile, make_provider, make_route):
    from batches.retry import retry_failed

    _, _, batches = hostile
    make_route("intent", make_provider("alpha"))
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123456")
    client.force_login(admin)
    original = next(b for b in batches if b.metadata == {"retry_of": "not-a-uuid"})
    Batch.objects.filter(pk=original.pk).update(metadata={"job": "nightly"})
    new = retry_failed(Batch.objects.get(pk=original.pk))
    html = client.get(reverse("dashboard:batch_detail", args=[new.pk])).content.decode()
    assert re.search(
        'retry of <a href="{}"><code>{}…</code></a>'.format(
            re.escape(reverse("dashboard:batch_detail", args=[original.pk])), str(original.pk)[:8]
        ),
        html,
    )


def test_the_teams_api_reads_any_stored_metadata(hostile):
    team, _, batches = hostile
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'reader')[1]}")
    for batch in batches:
        response = client.get(f"/api/v1/batches/{batch.pk}")
        assert response.status_code == 200, batch.metadata if not isinstance(batch.metadata, str) else "str"
    listing = client.get("/api/v1/batches", {"limit": 100})
    assert listing.status_code == 200 and len(listing.json()["results"]) == len(batches)

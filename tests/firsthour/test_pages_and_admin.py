"""Dashboard and admin behaviour behind the 1280 px polish: every item reachable, the retry button,
cancelled batches, the usage dates applied, bucket levels, the admin's number bounds and help text,
and docs/api.md quoting the real cancel message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from batches.execution import cancel_batch
from batches.models import Batch, BatchItem
from batches.submission import submit_batch
from providers.models import Provider
from tests.dashboard.seed import ENV_SECRET, add_edge_cases, seed

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    data = seed()
    return data, add_edge_cases(data)


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123456")
    client.force_login(user)
    return client


def test_all_succeeded_batch_lists_every_item_with_a_link(staff, seeded):
    _, edge = seeded
    response = staff.get(reverse("dashboard:batch_detail", args=[edge.all_succeeded.pk]))
    items = list(response.context["page"].object_list)
    assert response.context["item_status"] == "" and len(items) == 12
    html = response.content.decode()
    for item in items:
        assert reverse("dashboard:item_detail", args=[item.pk]) in html
    assert reverse("dashboard:batch_retry_failed", args=[edge.all_succeeded.pk]) not in html  # nothing failed


def test_batch_page_defaults_to_failed_items_and_filters_by_status(staff, seeded):
    data, edge = seeded
    url = reverse("dashboard:batch_detail", args=[edge.cancelled.pk])
    assert {i.status for i in staff.get(url).context["page"].object_list} == {"failed"}
    cancelled = staff.get(url, {"items": "cancelled"}).context["page"].object_list
    assert len(cancelled) == 13 and {i.status for i in cancelled} == {"cancelled"}
    assert len(staff.get(url, {"items": ""}).context["page"].object_list) == 20
    assert len(staff.get(url, {"items": "bogus"}).context["page"].object_list) == 20


def test_cancelled_batch_is_not_shown_as_100_percent_finished(staff, seeded):
    _, edge = seeded
    response = staff.get(reverse("dashboard:batch_detail", args=[edge.cancelled.pk]))
    html = response.content.decode()
    assert "7 of 20" in html and "run before it was cancelled" in html
    assert "100.0 %" not in html
    summary = response.context["summary"]
    assert (summary.succeeded_pct, summary.failed_pct, summary.skipped_pct) == (30.0, 5.0, 65.0)


def test_retry_button_resubmits_failed_items_and_redirects_to_the_new_batch(staff, seeded):
    data, _ = seeded
    url = reverse("dashboard:batch_detail", args=[data.completed.pk])
    assert (
        reverse("dashboard:batch_retry_failed", args=[data.completed.pk]) in staff.get(url).content.decode()
    )
    before = Batch.objects.count()
    response = staff.post(reverse("dashboard:batch_retry_failed", args=[data.completed.pk]))
    new = Batch.objects.exclude(pk__in=[data.completed.pk]).order_by("-created_at").first()
    assert Batch.objects.count() == before + 1
    assert response.status_code == 302 and response.url == reverse("dashboard:batch_detail", args=[new.pk])
    assert new.metadata["retry_of"] == str(data.completed.pk) and new.total_count == 7
    assert list(BatchItem.objects.filter(batch=new).order_by("seq").values_list("custom_id", flat=True)) == [
        f"req-{i:05d}" for i in range(7)
    ]
    # a second click: no second batch, a message pointing at the first retry
    again = staff.post(reverse("dashboard:batch_retry_failed", args=[data.completed.pk]), follow=True)
    assert Batch.objects.count() == before + 1
    assert "already retried" in again.content.decode()
    assert staff.get(reverse("dashboard:batch_retry_failed", args=[data.completed.pk])).status_code == 405


def test_usage_page_shows_the_dates_it_applies(staff, seeded):
    response = staff.get(reverse("dashboard:usage"))
    form = response.context["form"]
    today = timezone.now().date()
    assert form["date_to"].value() == today.isoformat()
    assert form["date_from"].value() == (today - timezone.timedelta(days=13)).isoformat()
    assert f'value="{today.isoformat()}"' in response.content.decode()


def test_admin_rpm_and_tpm_refuse_zero_and_negative_with_one_message(staff):
    p = Provider.objects.create(
        name="alpha", base_url="http://127.0.0.1:1/v1", model="m", rpm=60, tpm=1000, max_concurrency=6
    )
    url = reverse("admin:providers_provider_changelist")
    page = staff.get(url).content.decode()
    for field in ("rpm", "tpm"):  # the browser widget agrees with the validators
        assert re.search(
            rf'<input type="number" name="form-0-{field}" value="\d+" class="vIntegerField[^"]*" min="1"',
            page,
        )
    messages = set()
    for value in ("-5", "0"):
        for field in ("rpm", "tpm"):
            data = {
                "form-TOTAL_FORMS": "1",
                "form-INITIAL_FORMS": "1",
                "form-MIN_NUM_FORMS": "0",
                "form-MAX_NUM_FORMS": "1000",
                "form-0-id": str(p.pk),
                "form-0-rpm": "60",
                "form-0-tpm": "1000",
                "form-0-max_concurrency": "6",
                "form-0-enabled": "on",
                "_save": "Save",
                f"form-0-{field}": value,
            }
            response = staff.post(url, data)
            assert response.status_code == 200
            errors = response.context["cl"].formset.errors[0][field]
            assert len(errors) == 1
            messages.add(errors[0])
    assert messages == {"Ensure this value is greater than or equal to 1."}
    p.refresh_from_db()
    assert (p.rpm, p.tpm) == (60, 1000)


def test_admin_help_text_shows_the_env_var_placeholder(staff):
    html = staff.get(reverse("admin:providers_provider_add")).content.decode()
    assert "GATEWAY_PROVIDER_SECRET_&lt;NAME&gt;" in html
    assert "GATEWAY_PROVIDER_SECRET_<NAME>" not in html
    assert 'min="1"' in html


def test_api_key_admin_calls_the_label_name_like_the_cli(staff, seeded):
    html = staff.get(reverse("admin:teams_apikey_add")).content.decode()
    assert 'for="id_name"' in html and ">Name:<" in html and "Label" not in html
    listing = staff.get(reverse("admin:teams_apikey_changelist")).content.decode()
    for header in ("Name", "Last used", "Revoked at"):
        assert header in listing


def test_docs_quote_the_real_cancel_message(team, make_provider, make_route):
    make_route("intent", make_provider("alpha"))
    batch = submit_batch(team=team, items=[{"custom_id": "a", "route": "intent", "query": "q"}])
    cancel_batch(str(batch.id))
    message = BatchItem.objects.get(batch=batch).error_message
    assert message and f'"message": "{message}"' in (ROOT / "docs" / "api.md").read_text()


def test_providers_page_shows_bucket_levels_unrounded(staff, redis_sync, settings):
    # rpm 90 with a 5 s burst: an RPM bucket of 7.5 tokens (it was shown as "7.5 / 8"); without the
    # conformance margin (docs/quota.md), which takes its own share off the burst
    settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = 0.0
    Provider.objects.create(
        name="half", base_url="http://127.0.0.1:1/v1", model="m", rpm=90, tpm=100_000, max_concurrency=2
    )
    html = staff.get(reverse("dashboard:providers")).content.decode()
    assert "7.5 / 7.5" in html and "7.5 / 8" not in html
    assert "8,333 / 8,333" in html  # TPM 100,000 × 5 s / 60, with thousands separators

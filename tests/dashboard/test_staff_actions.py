"""Staff pages and powers (#28): `/` sends staff to the dashboard and everyone else to the API docs; a
batch can be cancelled from its dashboard page (confirm, then POST with CSRF), with an admin action and
with `manage.py cancel_batch ID`; a batch that completed with failures says so in a warning colour."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from tests.factories import make_batch, work_item

pytestmark = pytest.mark.django_db


def pending_batch(team, n: int = 5) -> Batch:
    return make_batch(team, [work_item(f"r{i}", route="intent") for i in range(n)])


# --- / ------------------------------------------------------------------------------------------------


def test_root_sends_staff_to_the_dashboard(staff_client):
    response = staff_client.get("/")
    assert response.status_code == 302 and response.url == reverse("dashboard:batches")


def test_root_sends_everyone_else_to_the_api_docs(client, plain_user):
    anonymous = client.get("/")
    assert anonymous.status_code == 302 and anonymous.url == reverse("api:docs")
    assert client.get(anonymous.url).status_code == 200
    client.force_login(plain_user)
    assert client.get("/").url == reverse("api:docs")


def test_admin_view_site_link_leads_somewhere(staff_client):
    # the admin's "View site" points at "/" (site_url); it used to be a 404
    assert staff_client.get("/", follow=True).status_code == 200


# --- cancel from the dashboard ------------------------------------------------------------------------


def test_running_batch_page_offers_cancel_behind_a_confirmation(staff_client, seeded):
    page = staff_client.get(reverse("dashboard:batch_detail", args=[seeded.running.pk])).content.decode()
    confirm_url = reverse("dashboard:batch_cancel", args=[seeded.running.pk])
    assert f'href="{confirm_url}"' in page  # a link to the confirmation, not a one-click POST
    confirm = staff_client.get(confirm_url)
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert f'<form method="post" action="{confirm_url}">' in html
    assert "csrfmiddlewaretoken" in html and "in flight" in html
    assert Batch.objects.get(pk=seeded.running.pk).status == BatchStatus.RUNNING  # a GET changes nothing


def test_cancel_post_cancels_unsent_items_and_comes_back_with_a_message(staff_client, team):
    batch = pending_batch(team)
    response = staff_client.post(reverse("dashboard:batch_cancel", args=[batch.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("dashboard:batch_detail", args=[batch.pk])
    batch.refresh_from_db()
    assert batch.status == BatchStatus.CANCELLED and batch.cancelled_count == 5
    assert set(BatchItem.objects.filter(batch=batch).values_list("status", flat=True)) == {
        ItemStatus.CANCELLED
    }
    assert "Cancelled batch" in response.content.decode()


def test_cancel_needs_csrf(staff_user, team):
    batch = pending_batch(team)
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    assert client.post(reverse("dashboard:batch_cancel", args=[batch.pk])).status_code == 403
    assert Batch.objects.get(pk=batch.pk).status == BatchStatus.QUEUED


def test_cancel_is_staff_only(client, plain_user, team):
    batch = pending_batch(team)
    url = reverse("dashboard:batch_cancel", args=[batch.pk])
    assert client.post(url).status_code == 302  # anonymous → login
    client.force_login(plain_user)
    assert client.post(url).status_code == 403
    assert Batch.objects.get(pk=batch.pk).status == BatchStatus.QUEUED


def test_finished_batch_has_no_cancel_and_a_post_changes_nothing(staff_client, seeded):
    url = reverse("dashboard:batch_detail", args=[seeded.completed.pk])
    assert (
        reverse("dashboard:batch_cancel", args=[seeded.completed.pk])
        not in staff_client.get(url).content.decode()
    )
    response = staff_client.post(reverse("dashboard:batch_cancel", args=[seeded.completed.pk]), follow=True)
    assert "Not cancelled" in response.content.decode()
    assert Batch.objects.get(pk=seeded.completed.pk).status == BatchStatus.COMPLETED


# --- admin action -------------------------------------------------------------------------------------


def test_admin_action_cancels_the_selected_batches(client, team):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123456")
    client.force_login(admin)
    one, two = pending_batch(team), pending_batch(team, 3)
    response = client.post(
        reverse("admin:batches_batch_changelist"),
        {"action": "cancel_batches", "_selected_action": [str(one.pk), str(two.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    assert set(Batch.objects.filter(pk__in=[one.pk, two.pk]).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert "Cancelled 2 batch(es)" in response.content.decode()


def test_admin_action_is_listed_for_who_may_change_batches_only(client, team):
    pending_batch(team)
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123456")
    client.force_login(admin)
    assert 'value="cancel_batches"' in client.get(reverse("admin:batches_batch_changelist")).content.decode()
    from django.contrib.auth.models import Permission

    viewer = get_user_model().objects.create_user("viewer2", password="pw-view-123456", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_batch"))
    client.force_login(viewer)
    html = client.get(reverse("admin:batches_batch_changelist")).content.decode()
    assert 'value="cancel_batches"' not in html


# --- manage.py cancel_batch ---------------------------------------------------------------------------


def test_cancel_batch_command_prints_the_resulting_status(team):
    batch = pending_batch(team)
    out = io.StringIO()
    call_command("cancel_batch", str(batch.pk), stdout=out)
    assert out.getvalue().strip() == f"batch {batch.pk}: cancelled (5 of 5 items cancelled, 0 in flight)"
    assert Batch.objects.get(pk=batch.pk).status == BatchStatus.CANCELLED


def test_cancel_batch_command_on_a_finished_batch_says_nothing_changed(seeded):
    out = io.StringIO()
    call_command("cancel_batch", str(seeded.completed.pk), stdout=out)
    assert out.getvalue().strip().startswith(f"batch {seeded.completed.pk}: completed (already finished")


@pytest.mark.parametrize(
    "value", ["3f2b8c1e-9d4a-4e6b-8a71-5c0d2e9f4b13", "not-a-uuid"]
)  # fixed: pytest-xdist workers must collect the same ids
def test_cancel_batch_command_refuses_an_unknown_id_in_one_sentence(db, value):
    with pytest.raises(CommandError) as caught:
        call_command("cancel_batch", value)
    message = str(caught.value)
    assert message.count(".") <= 1 and "\n" not in message
    assert value in message and "no batch" in message


# --- completed with failures --------------------------------------------------------------------------


def test_completed_with_failures_is_a_warning_badge_on_list_and_detail(staff_client, seeded):
    # seeded.completed: 50 items, 7 failed
    detail = staff_client.get(reverse("dashboard:batch_detail", args=[seeded.completed.pk])).content.decode()
    listing = staff_client.get(reverse("dashboard:batches")).content.decode()
    for html in (detail, listing):
        assert re.search(r'<span class="pill completed warn"[^>]*>completed — 7 failed</span>', html), html[
            :0
        ]
    # the all-good batch keeps the plain green badge
    ok = Batch.objects.create(
        team=seeded.teams["acme"], status=BatchStatus.COMPLETED, total_count=3, completed_count=3
    )
    page = staff_client.get(reverse("dashboard:batch_detail", args=[ok.pk])).content.decode()
    assert '<span class="pill completed">completed</span>' in page and "completed —" not in page


def page_css(html: str) -> str:
    """The CSS a page uses: its <style> blocks and the static stylesheets it links."""
    from django.contrib.staticfiles import finders

    css = re.findall(r"<style[^>]*>(.*?)</style>", html, flags=re.S)
    for href in re.findall(r'<link rel="stylesheet" href="/static/([^"?]+)', html):
        path = finders.find(href)
        css.append(open(path).read() if path else "")
    return "\n".join(css)


def test_warning_badge_has_a_warning_colour(staff_client, seeded):
    """The badge's rule in the dashboard's CSS: a warning (orange) background, not the green one."""
    css = page_css(staff_client.get(reverse("dashboard:batches")).content.decode())
    rule = re.search(r"\.pill\.completed\.warn\s*\{([^}]*)\}", css)
    assert rule, "no .pill.completed.warn rule"
    background = re.search(r"background:\s*(#[0-9a-fA-F]{6})", rule.group(1)).group(1)
    red, green, blue = (int(background[k : k + 2], 16) for k in (1, 3, 5))
    assert red > green > blue, background  # orange-ish: a warning colour

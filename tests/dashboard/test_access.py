"""Every dashboard page: anonymous → login redirect, non-staff → 403, staff → 200."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from .pages import all_pages

PAGES = [
    "batches",
    "batches_filtered",
    "batch_completed",
    "batch_running",
    "item",
    "failures",
    "providers",
    "usage",
    "usage_csv",
]


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_is_redirected_to_login(client, seeded, page):
    url = all_pages(seeded)[page]
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")
    assert quote(url.split("?")[0], safe="/") in response["Location"]


@pytest.mark.parametrize("page", PAGES)
def test_non_staff_user_gets_403(client, seeded, plain_user, page):
    client.force_login(plain_user)
    assert client.get(all_pages(seeded)[page]).status_code == 403


@pytest.mark.parametrize("page", PAGES)
def test_staff_user_gets_200(staff_client, seeded, page):
    response = staff_client.get(all_pages(seeded)[page])
    assert response.status_code == 200


def test_inactive_staff_is_not_let_in(client, seeded, staff_user):
    client.force_login(staff_user)
    staff_user.is_active = False
    staff_user.save()
    response = client.get(all_pages(seeded)["batches"])
    # Django's auth drops inactive users from the session: they are anonymous again
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_unknown_batch_and_item_are_404(staff_client, seeded):
    assert staff_client.get("/dashboard/batches/00000000-0000-0000-0000-000000000000/").status_code == 404
    assert staff_client.get("/dashboard/items/999999999/").status_code == 404


def test_admin_links_to_the_dashboard(staff_client, seeded):
    response = staff_client.get("/admin/")
    assert response.status_code == 200
    assert b'href="/dashboard/"' in response.content

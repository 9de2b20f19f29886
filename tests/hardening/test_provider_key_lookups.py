"""A provider's key is write-only in the admin: no changelist lookup on it, at any depth (least privilege,
second pass). Before: ``?api_key__startswith=<guess>`` listed the provider for a right prefix and nothing
for a wrong one, so an operator recovered a full key one character at a time."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

pytestmark = pytest.mark.django_db

KEY = "AIzaSyD-operator-must-never-read-this-0123"


@pytest.fixture
def operator_client(client):
    user = get_user_model().objects.create_user("op", password="op-pass-123", is_staff=True)
    user.groups.add(Group.objects.get(name="gateway operator"))
    client.force_login(user)
    return client


@pytest.fixture
def gpt(make_provider, make_route):
    provider = make_provider("gpt", api_key=KEY)
    make_route("chat", provider)
    return provider


@pytest.mark.parametrize(
    "url, lookup, extra",
    [
        ("/admin/providers/provider/", "api_key__startswith", {"name": "gpt"}),
        ("/admin/providers/provider/", "api_key", {}),
        ("/admin/providers/provider/", "api_key__regex", {}),
        ("/admin/providers/routingrule/", "provider__api_key__startswith", {}),
        ("/admin/providers/provider/", "routes__provider__api_key__startswith", {}),
    ],
)
def test_a_prefix_probe_on_the_key_is_refused_the_same_for_right_and_wrong(
    operator_client, gpt, url, lookup, extra
):
    right = operator_client.get(url, {**extra, lookup: KEY[:5]})
    wrong = operator_client.get(url, {**extra, lookup: "zzzzz"})
    assert right.status_code == wrong.status_code == 400, (right.status_code, wrong.status_code)
    assert right.content == wrong.content
    assert b"gpt" not in right.content


def test_the_changelist_still_filters_by_its_own_filters(operator_client, gpt):
    page = operator_client.get("/admin/providers/provider/", {"enabled__exact": "1"})
    assert page.status_code == 200 and b"gpt" in page.content
    assert KEY.encode() not in page.content


def test_neither_the_change_form_nor_a_search_shows_or_finds_the_key(operator_client, gpt):
    form = operator_client.get(f"/admin/providers/provider/{gpt.pk}/change/")
    assert form.status_code == 200 and KEY.encode() not in form.content
    found = operator_client.get("/admin/providers/provider/", {"q": KEY[:12]})
    assert found.status_code == 200 and b"/admin/providers/provider/%d/change/" % gpt.pk not in found.content

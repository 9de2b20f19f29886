"""Dashboard date filters at the edges of the calendar are form errors, never 500s (#13).
Pre-fix: 9999-12-31 (+1 day) and 0001-01-01 (−13 days) overflowed → 500."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

EDGES = [
    {"date_from": "9999-12-31"},
    {"date_to": "9999-12-31"},
    {"date_from": "0001-01-01"},
    {"date_to": "0001-01-01"},
    {"date_from": "0001-01-01", "date_to": "9999-12-31"},
]


@pytest.fixture
def staff(db):
    client = Client()
    client.force_login(get_user_model().objects.create_user("s", "s@example.com", "pw", is_staff=True))
    return client


@pytest.mark.parametrize(
    "page", ["dashboard:batches", "dashboard:failures", "dashboard:usage", "dashboard:usage_csv"]
)
@pytest.mark.parametrize("params", EDGES)
def test_calendar_edges_are_form_errors(staff, page, params):
    response = staff.get(reverse(page), params)
    # the HTML pages show the form error on the page (200); the CSV download has no page: 400
    assert response.status_code == (400 if page == "dashboard:usage_csv" else 200), response.status_code
    if page != "dashboard:usage_csv":
        form = response.context["form"]
        assert form.errors
        assert set(form.errors) <= {"date_from", "date_to"}
        assert any("between 2000-01-01 and 2999-12-31" in str(e) for e in form.errors.values())


def test_ordinary_dates_still_work(staff):
    response = staff.get(reverse("dashboard:failures"), {"date_from": "2026-01-01", "date_to": "2026-01-31"})
    assert response.status_code == 200 and not response.context["form"].errors

"""The admin login locks a (client IP, username) pair after repeated failures (#29, django-axes).

Pre-fix: /admin/login/ had no lockout — any number of wrong passwords, then the right one logged in.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db

PASSWORD = "right-pass-123456"
LOGIN = "/admin/login/"


@pytest.fixture
def staff(settings):
    settings.AXES_FAILURE_LIMIT = 3
    return get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)


def attempt(client: Client, password: str, username: str = "ops"):
    return client.post(LOGIN + "?next=/admin/", {"username": username, "password": password})


def logged_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == "/admin/"


def test_failed_logins_lock_the_pair_even_for_the_right_password(staff):
    client = Client(REMOTE_ADDR="192.0.2.10")
    for _ in range(2):
        failed = attempt(client, "wrong")
        assert failed.status_code == 200  # the login form again, with its error
        assert "Please enter the correct username and password" in failed.content.decode()
    locked = attempt(client, "wrong")  # the 3rd failure reaches the limit
    assert locked.status_code == 429
    again = attempt(client, PASSWORD)
    assert again.status_code == 429 and not logged_in(again)
    assert "too many login attempts" in again.content.decode().lower()
    assert "_auth_user_id" not in client.session


def test_the_lock_is_per_address_and_username(staff):
    get_user_model().objects.create_user("other", password=PASSWORD, is_staff=True)
    attacker = Client(REMOTE_ADDR="192.0.2.11")
    for _ in range(3):
        attempt(attacker, "wrong")
    assert attempt(attacker, PASSWORD).status_code == 429
    # the same user from another address, and another user from the attacker's address, still log in
    assert logged_in(attempt(Client(REMOTE_ADDR="192.0.2.12"), PASSWORD))
    assert logged_in(attempt(Client(REMOTE_ADDR="192.0.2.11"), PASSWORD, username="other"))


def test_the_lock_ends_after_the_cool_off(staff, settings):
    from axes.models import AccessAttempt

    client = Client(REMOTE_ADDR="192.0.2.13")
    for _ in range(3):
        attempt(client, "wrong")
    assert attempt(client, PASSWORD).status_code == 429
    past = timezone.now() - settings.AXES_COOLOFF_TIME - dt.timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=past)
    assert logged_in(attempt(client, PASSWORD))


def test_a_successful_login_clears_the_failures(staff):
    client = Client(REMOTE_ADDR="192.0.2.14")
    for _ in range(2):
        attempt(client, "wrong")
    assert logged_in(attempt(client, PASSWORD))
    client.logout()
    for _ in range(2):
        assert attempt(client, "wrong").status_code == 200
    assert logged_in(attempt(client, PASSWORD))


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_lock(staff, settings):
    from gateway_site.security import parse_networks

    settings.GATEWAY_TRUSTED_PROXIES = parse_networks(["10.0.0.0/8"])
    attacker = Client(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="198.51.100.20")
    for _ in range(3):
        attempt(attacker, "wrong")
    assert attempt(attacker, PASSWORD).status_code == 429
    # another client through the same proxy is not locked; a forged left part does not unlock the attacker
    assert logged_in(attempt(Client(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="198.51.100.21"), PASSWORD))
    forged = Client(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="203.0.113.1, 198.51.100.20")
    assert attempt(forged, PASSWORD).status_code == 429


def test_the_defaults_are_documented_values(settings):
    """5 failures, 15 minutes, per (IP, username) — README's configuration table."""
    from gateway_site.settings import base

    assert base.AXES_FAILURE_LIMIT == 5
    assert base.AXES_COOLOFF_TIME == dt.timedelta(minutes=15)
    assert base.AXES_LOCKOUT_PARAMETERS == [["ip_address", "username"]]
    assert base.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"

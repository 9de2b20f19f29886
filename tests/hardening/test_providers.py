"""Provider safety (#13): the key never follows a base_url to a new origin without a superuser's
confirmation; colliding secret variable names are refused; reprs never show keys; a 429 pause can
be cleared from the admin."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from batches.execution import load_routing_table
from gateway_engine.routing import ProviderConfig
from providers.adapters import provider_limits
from providers.models import Provider
from providers.services import ProviderConfigError, load_provider_config
from tests.factories import login_staff
from tests.test_admin import _change_form_data

pytestmark = pytest.mark.django_db
SECRET = "sk-very-secret-provider-key-123"


@pytest.fixture
def superuser_client(db):
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw-root-12345"))
    return client


@pytest.fixture
def staff_client(db):
    """Staff who may edit providers but is not a superuser."""
    return login_staff(Client(), "change_provider", "view_provider")


def config(name: str) -> ProviderConfig:
    return load_routing_table().providers[name]


def test_new_providers_have_their_origin_confirmed(make_provider):
    p = make_provider("alpha", base_url="https://api.example.com/v1")
    assert p.confirmed_origin == "https://api.example.com:443"
    assert config("alpha").enabled


def test_a_staff_url_change_to_another_host_disables_the_provider_until_a_superuser_confirms(
    staff_client, superuser_client, make_provider
):
    """Pre-fix: the key silently followed the new base_url (a staff user could send it anywhere)."""
    p = make_provider("alpha", base_url="https://api.example.com/v1", api_key=SECRET)
    change = reverse("admin:providers_provider_change", args=[p.pk])
    # the same origin, another path: still fine
    response = staff_client.post(change, _change_form_data(p, base_url="https://api.example.com:443/v2"))
    assert response.status_code == 302, response.content.decode()[:1500]
    assert config("alpha").enabled and config("alpha").api_key == SECRET
    # another host: saved, but disabled and keyless for the engine
    response = staff_client.post(
        change, _change_form_data(p, base_url="https://evil.example.net/v1"), follow=True
    )
    assert "disabled until a superuser confirms" in response.content.decode()
    p.refresh_from_db()
    assert (p.base_url, p.enabled, p.origin_confirmed) == ("https://evil.example.net/v1", True, False)
    assert (config("alpha").enabled, config("alpha").api_key) == (False, "")
    # a non-superuser cannot confirm
    changelist = reverse("admin:providers_provider_changelist")
    staff_client.post(changelist, {"action": "confirm_origin", "_selected_action": [p.pk]})
    p.refresh_from_db()
    assert not p.origin_confirmed
    # the superuser can
    response = superuser_client.post(changelist, {"action": "confirm_origin", "_selected_action": [p.pk]})
    assert response.status_code == 302
    p.refresh_from_db()
    assert p.origin_confirmed and p.confirmed_origin == "https://evil.example.net:443"
    assert config("alpha").enabled and config("alpha").api_key == SECRET


def test_a_key_from_the_environment_is_held_back_too(make_provider, monkeypatch):
    p = make_provider("alpha", base_url="https://api.example.com/v1")
    monkeypatch.setenv(p.secret_env_name, SECRET)
    p.base_url = "http://127.0.0.1:9/v1"
    p.save()
    assert (config("alpha").enabled, config("alpha").api_key) == (False, "")


def test_a_legacy_row_without_confirmed_origin_still_needs_confirmation(make_provider):
    p = make_provider("alpha", base_url="https://api.example.com/v1")
    Provider.objects.filter(pk=p.pk).update(confirmed_origin="")  # a row from before the column
    p = Provider.objects.get(pk=p.pk)
    p.base_url = "https://other.example.org/v1"
    p.save()
    assert p.confirmed_origin == "https://api.example.com:443" and not p.origin_confirmed


def _file(base_url: str, name: str = "alpha") -> dict:
    return {
        "providers": [
            {"name": name, "base_url": base_url, "model": "m", "rpm": 60, "tpm": 1000, "max_concurrency": 2}
        ]
    }


def test_loader_disables_on_origin_change_unless_allowed():
    load_provider_config(_file("https://api.example.com/v1"))
    report = load_provider_config(_file("https://elsewhere.example.com/v1"))
    assert any("DISABLED until confirmed" in line for line in report.changes)
    assert not config("alpha").enabled
    report = load_provider_config(_file("https://elsewhere.example.com/v1"), allow_origin_change=True)
    assert any("confirmed (--allow-origin-change)" in line for line in report.changes)
    assert config("alpha").enabled


def test_colliding_secret_variable_names_are_refused(make_provider):
    """Pre-fix: 'my-prov' and 'my_prov' both read GATEWAY_PROVIDER_SECRET_MY_PROV."""
    make_provider("my-prov")
    twin = Provider(
        name="my_prov", base_url="https://x.example.com/v1", model="m", rpm=1, tpm=1, max_concurrency=1
    )
    with pytest.raises(ValidationError) as exc:
        twin.full_clean()
    assert "GATEWAY_PROVIDER_SECRET_MY_PROV" in str(exc.value)
    with pytest.raises(ProviderConfigError) as exc:
        load_provider_config(_file("https://x.example.com/v1", name="my_prov"))
    assert "GATEWAY_PROVIDER_SECRET_MY_PROV" in str(exc.value)
    two = {
        "providers": _file("https://a.example.com/v1", "a-b")["providers"]
        + _file("https://b.example.com/v1", "a_b")["providers"]
    }
    with pytest.raises(ProviderConfigError):
        load_provider_config(two)
    assert not Provider.objects.filter(name__in=["a-b", "a_b", "my_prov"]).exists()


def test_reprs_never_show_keys(make_provider):
    p = make_provider("alpha", api_key=SECRET)
    assert SECRET not in repr(p)
    assert SECRET not in repr(config("alpha")) and SECRET not in str(config("alpha"))
    assert SECRET not in repr(load_routing_table())


def test_admin_action_clears_a_rate_limit_pause(superuser_client, make_provider, redis_sync):
    from providers.limits import get_quota_store, reset_quota_store

    p = make_provider("alpha")
    limits = provider_limits(p)
    reset_quota_store()

    async def penalize_and_read():
        store = get_quota_store()
        try:
            await store.penalize(limits, 500)
            return (await store.snapshot(limits)).paused_until_ms
        finally:
            await store.aclose()

    async def read():
        store = get_quota_store()
        try:
            return await store.snapshot(limits)
        finally:
            await store.aclose()

    assert asyncio.run(penalize_and_read()) > 0
    response = superuser_client.post(
        reverse("admin:providers_provider_changelist"), {"action": "clear_pause", "_selected_action": [p.pk]}
    )
    assert response.status_code == 302
    state = asyncio.run(read())
    assert state.paused_until_ms == 0 and state.wait_ms == 0
    json.dumps(state.provider)  # plain data

import re

import pytest
from django.urls import reverse

from providers.adapters import provider_key
from providers.models import Provider
from teams.keys import hash_key
from teams.models import ApiKey
from tests.factories import login_superuser

SECRET = "sk-very-secret-provider-key-123"


@pytest.fixture
def staff_client(client, db):
    return login_superuser(client)


def _changelist_post(provider: Provider, **changes) -> dict:
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "form-0-id": str(provider.pk),
        "form-0-rpm": str(provider.rpm),
        "form-0-tpm": str(provider.tpm),
        "form-0-max_concurrency": str(provider.max_concurrency),
        "form-0-enabled": "on",
        "_save": "Save",
    }
    data.update({f"form-0-{k}": str(v) for k, v in changes.items()})
    return data


def test_inline_rpm_edit_persists(staff_client, make_provider):
    p = make_provider("alpha")
    url = reverse("admin:providers_provider_changelist")
    response = staff_client.post(url, _changelist_post(p, rpm=120))
    assert response.status_code == 302
    p.refresh_from_db()
    assert p.rpm == 120


def test_inline_invalid_value_rejected_with_message(staff_client, make_provider):
    p = make_provider("alpha")
    url = reverse("admin:providers_provider_changelist")
    response = staff_client.post(url, _changelist_post(p, rpm=0))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Please correct the error" in body
    assert "greater than or equal to 1" in body
    p.refresh_from_db()
    assert p.rpm == 60


def _change_form_data(p: Provider, **overrides) -> dict:
    data = {
        "name": p.name,
        "base_url": p.base_url,
        "model": p.model,
        "kind": p.kind,
        "deployment": p.deployment,
        "api_version": p.api_version,
        "api_key": "",
        "rpm": p.rpm,
        "tpm": p.tpm,
        "max_concurrency": p.max_concurrency,
        "burst_seconds": p.burst_seconds,
        "timeout_seconds": p.timeout_seconds,
        "max_retries": p.max_retries,
        "enabled": "on",
        "routes-TOTAL_FORMS": "0",
        "routes-INITIAL_FORMS": "0",
        "routes-MIN_NUM_FORMS": "0",
        "routes-MAX_NUM_FORMS": "1000",
    }
    data.update(overrides)
    return data


def test_api_key_is_write_only_in_every_admin_page(staff_client, make_provider):
    p = make_provider("alpha")
    change_url = reverse("admin:providers_provider_change", args=[p.pk])
    response = staff_client.post(change_url, _change_form_data(p, api_key=SECRET))
    assert response.status_code == 302, response.content.decode()[:2000]
    p.refresh_from_db()
    assert provider_key(p) == SECRET and SECRET not in p.api_key  # stored sealed
    # saving again with a blank key keeps the stored one
    response = staff_client.post(change_url, _change_form_data(p, rpm=61))
    assert response.status_code == 302
    p.refresh_from_db()
    assert (provider_key(p), p.rpm) == (SECRET, 61)
    pages = [
        change_url,
        reverse("admin:providers_provider_changelist"),
        reverse("admin:providers_provider_history", args=[p.pk]),
        reverse("admin:providers_routingrule_changelist"),
        reverse("admin:index"),
    ]
    for url in pages:
        page = staff_client.get(url)
        assert page.status_code == 200, url
        assert SECRET not in page.content.decode(), url
    assert "database (hidden)" in staff_client.get(change_url).content.decode()


def test_clear_api_key(staff_client, make_provider):
    p = make_provider("alpha", api_key=SECRET)
    change_url = reverse("admin:providers_provider_change", args=[p.pk])
    response = staff_client.post(change_url, _change_form_data(p, clear_api_key="on"))
    assert response.status_code == 302
    p.refresh_from_db()
    assert p.api_key == ""


def test_change_form_invalid_url_shows_error(staff_client, make_provider):
    p = make_provider("alpha")
    change_url = reverse("admin:providers_provider_change", args=[p.pk])
    response = staff_client.post(change_url, _change_form_data(p, base_url="ftp://x/v1"))
    assert response.status_code == 200
    assert "Enter a valid URL" in response.content.decode()


def test_admin_creates_api_key_and_shows_it_once(staff_client, team):
    response = staff_client.post(reverse("admin:teams_apikey_add"), {"team": team.pk, "name": "ci"})
    assert response.status_code == 200  # its own page, not a redirect with a message
    assert "no-store" in response["Cache-Control"]
    raw = response.context["raw_key"]
    assert raw in response.content.decode()
    # the copy button's target
    assert (
        re.search(
            r'<code data-copy="[^"]*" id="new-api-key-text">([^<]+)</code>', response.content.decode()
        ).group(1)
        == raw
    )
    # never in a cookie (the messages cookie carried it before)
    assert all(raw not in morsel.value for morsel in response.cookies.values())
    assert not [str(m) for m in response.context["messages"]]
    key = ApiKey.objects.get(team=team, name="ci")
    assert key.key_hash == hash_key(raw)
    assert raw.startswith(key.prefix)
    # the next page no longer shows it
    later = staff_client.get(reverse("admin:teams_apikey_change", args=[key.pk]))
    assert raw not in later.content.decode()


def test_batch_admin_is_read_only(staff_client, team):
    from batches.models import Batch

    batch = Batch.objects.create(team=team, total_count=3)
    page = staff_client.get(reverse("admin:batches_batch_changelist"))
    assert page.status_code == 200
    assert f"?batch__id__exact={batch.pk}" in page.content.decode()
    assert staff_client.get(reverse("admin:batches_batch_add")).status_code == 403


def test_kind_is_listed_and_azure_fields_are_checked_on_their_field(staff_client, make_provider):
    p = make_provider("alpha")
    make_provider("claude", kind="anthropic")
    changelist = staff_client.get(reverse("admin:providers_provider_changelist")).content.decode()
    assert "column-kind" in changelist and ">anthropic<" in changelist
    change_url = reverse("admin:providers_provider_change", args=[p.pk])
    response = staff_client.post(change_url, _change_form_data(p, kind="azure_openai"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["api_version"] == ["required for kind azure_openai"]
    assert errors["burst_seconds"][0].startswith("must be at most 1 for kind azure_openai")
    p.refresh_from_db()
    assert p.kind == "openai"
    response = staff_client.post(
        change_url,
        _change_form_data(p, kind="azure_openai", api_version="2024-10-21", burst_seconds=1, itpm=5000),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    p.refresh_from_db()
    assert (p.kind, p.api_version, p.burst_seconds, p.itpm) == ("azure_openai", "2024-10-21", 1.0, 5000)
    response = staff_client.post(change_url, _change_form_data(p, kind="gemini", deployment="x"))
    assert response.context["adminform"].form.errors["deployment"] == [
        "only for kind azure_openai, not for kind gemini"
    ]


def test_a_post_without_kind_keeps_the_providers_kind(staff_client, make_provider):
    p = make_provider("claude", kind="anthropic")
    data = _change_form_data(p, rpm=61)
    del data["kind"]
    response = staff_client.post(reverse("admin:providers_provider_change", args=[p.pk]), data)
    assert response.status_code == 302
    p.refresh_from_db()
    assert (p.kind, p.rpm) == ("anthropic", 61)

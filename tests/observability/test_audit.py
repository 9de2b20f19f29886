"""Configuration history: admin edits, load_providers, keys and teams, secrets only as "changed"."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from audit.models import ConfigChange
from providers.models import Provider
from teams.models import ApiKey
from teams.services import create_api_key, create_team, revoke_api_key
from tests.factories import login_superuser

pytestmark = pytest.mark.django_db

SECRET = "sk-audit-secret-5c1d"
NEW_SECRET = "sk-audit-rotated-9e8f"


@pytest.fixture
def staff_client(client, db):
    return login_superuser(client)


def provider_file(tmp_path, rpm: int, api_key: str = SECRET):
    data = {
        "providers": [
            {"name": "alpha", "base_url": "http://127.0.0.1:8900/alpha/v1", "model": "alpha-chat", "rpm": rpm,
             "tpm": 100000, "max_concurrency": 6, "api_key": api_key}
        ],
        "routes": [{"route": "intent", "provider": "alpha", "priority": 0, "weight": 1}],
    }  # fmt: skip
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(data))
    return str(path)


def change_form(p: Provider, **overrides) -> dict:
    data = {
        "name": p.name, "base_url": p.base_url, "model": p.model, "api_key": "", "rpm": p.rpm, "tpm": p.tpm,
        "max_concurrency": p.max_concurrency, "burst_seconds": p.burst_seconds,
        "timeout_seconds": p.timeout_seconds, "max_retries": p.max_retries, "enabled": "on", "adaptive": "on",
        "price_prompt_per_million": "", "price_completion_per_million": "",
        "routes-TOTAL_FORMS": "0", "routes-INITIAL_FORMS": "0", "routes-MIN_NUM_FORMS": "0",
        "routes-MAX_NUM_FORMS": "1000",
    }  # fmt: skip
    data.update(overrides)
    return data


def history_text() -> str:
    return json.dumps(list(ConfigChange.objects.values()), default=str)


def test_rpm_edits_in_admin_and_load_providers_are_recorded_with_old_and_new(staff_client, tmp_path):
    call_command("load_providers", provider_file(tmp_path, rpm=60), stdout=open("/dev/null", "w"))
    created = ConfigChange.objects.get(model="provider", action="created")
    assert (created.actor, created.via) == ("system", "command:load_providers")
    assert created.changes["rpm"] == {"old": None, "new": 60}
    assert created.changes["api_key"] == "set"
    assert ConfigChange.objects.filter(
        model="routing rule", action="created", object_repr="intent → alpha"
    ).exists()

    p = Provider.objects.get(name="alpha")
    url = reverse("admin:providers_provider_change", args=[p.pk])
    response = staff_client.post(url, change_form(p, rpm=90))
    assert response.status_code == 302, response.content.decode()[:2000]
    admin_edit = ConfigChange.objects.filter(model="provider", action="updated").latest("id")
    assert (admin_edit.actor, admin_edit.via) == ("ops", "admin")
    assert admin_edit.changes == {"rpm": {"old": 60, "new": 90}}  # the blank key field kept the key

    call_command("load_providers", provider_file(tmp_path, rpm=120), stdout=open("/dev/null", "w"))
    cmd_edit = ConfigChange.objects.filter(model="provider", action="updated").latest("id")
    assert (cmd_edit.actor, cmd_edit.via) == ("system", "command:load_providers")
    assert cmd_edit.changes == {"rpm": {"old": 90, "new": 120}}

    # a key change is recorded as "changed", never with the value
    call_command(
        "load_providers", provider_file(tmp_path, rpm=120, api_key=NEW_SECRET), stdout=open("/dev/null", "w")
    )
    key_edit = ConfigChange.objects.filter(model="provider", action="updated").latest("id")
    assert key_edit.changes == {"api_key": "changed"}
    response = staff_client.post(
        url, change_form(Provider.objects.get(pk=p.pk), api_key="sk-typed-in-admin-77")
    )
    assert response.status_code == 302
    assert ConfigChange.objects.filter(model="provider").latest("id").changes == {"api_key": "changed"}
    text = history_text()
    for secret in (SECRET, NEW_SECRET, "sk-typed-in-admin-77"):
        assert secret not in text

    # visible on the dashboard page and in the admin, without secrets
    page = staff_client.get(reverse("audit:history") + "?model=provider")
    body = page.content.decode()
    assert page.status_code == 200
    assert "command:load_providers" in body and "ops" in body and "changed" in body
    assert ">90<" in body and ">120<" in body
    assert all(s not in body for s in (SECRET, NEW_SECRET))
    admin_page = staff_client.get(reverse("admin:audit_configchange_changelist"))
    assert admin_page.status_code == 200 and "rpm: 90 → 120" in admin_page.content.decode()


def test_no_change_no_record_and_team_and_key_events(staff_client, tmp_path):
    path = provider_file(tmp_path, rpm=60)
    call_command("load_providers", path, stdout=open("/dev/null", "w"))
    before = ConfigChange.objects.count()
    call_command("load_providers", path, stdout=open("/dev/null", "w"))  # idempotent: nothing changed
    assert ConfigChange.objects.count() == before

    team, _ = create_team("acme")
    team.weight, team.daily_token_budget = 3, 50_000
    team.save()
    edit = ConfigChange.objects.filter(model="team", action="updated").get()
    assert edit.changes == {"weight": {"old": 1, "new": 3}, "daily_token_budget": {"old": None, "new": 50000}}

    key, raw = create_api_key(team, "ci")
    created = ConfigChange.objects.get(model="API key", action="created")
    assert (
        created.changes["key_hash"] == "set"
        and raw not in history_text()
        and key.key_hash not in history_text()
    )
    revoke_api_key(key)
    assert ConfigChange.objects.filter(model="API key", action="revoked", object_id=str(key.pk)).exists()

    # the admin's bulk revoke action records each key too
    other, _ = create_api_key(team, "other")
    url = reverse("admin:teams_apikey_changelist")
    response = staff_client.post(url, {"action": "revoke", "_selected_action": [str(other.pk)]})
    assert response.status_code == 302
    assert ApiKey.objects.get(pk=other.pk).revoked_at is not None
    revoked = ConfigChange.objects.get(model="API key", action="revoked", object_id=str(other.pk))
    assert revoked.actor == "ops" and revoked.via == "admin"

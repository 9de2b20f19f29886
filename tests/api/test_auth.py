"""Bearer API-key authentication, team scoping and per-key throttling."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from batches.submission import submit_batch
from teams.models import ApiKey
from teams.services import create_api_key, revoke_api_key

from .helpers import URL, item

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "/api/v1/batches"),
    ("post", "/api/v1/batches"),
    ("get", "/api/v1/batches/{id}"),
    ("get", "/api/v1/batches/{id}/results"),
    ("get", "/api/v1/batches/{id}/results?format=jsonl"),
    ("post", "/api/v1/batches/{id}/cancel"),
    ("get", "/api/v1/usage"),
]


def call(client, method, path, batch_id="00000000-0000-0000-0000-000000000000"):
    url = path.format(id=batch_id)
    if method == "post":
        return client.generic("POST", url, '{"items": []}', content_type="application/json")
    return client.get(url)


@pytest.mark.parametrize("method, path", ENDPOINTS)
def test_no_key_is_401_with_clear_message(anon, method, path):
    response = call(anon, method, path)
    assert response.status_code == 401
    assert "Authorization: Bearer" in response.json()["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header, message",
    [
        ("Bearer bgw_" + "x" * 43, "invalid API key"),
        ("Bearer not-a-gateway-key", "invalid API key"),
        ("Bearer", "malformed"),
        ("Bearer a b", "malformed"),
        ("Token bgw_abc", "Bearer scheme"),
        ("Basic dXNlcjpwYXNz", "Bearer scheme"),
    ],
)
def test_bad_key_is_401(team, header, message):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(URL)
    assert response.status_code == 401
    assert message in response.json()["detail"]


def test_revoked_key_is_401(api_key):
    key, raw = api_key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get(URL).status_code == 200
    revoke_api_key(key)
    response = client.get(URL)
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_last_used_at_is_written_at_most_once_a_minute(client, api_key):
    key = api_key[0]
    assert key.last_used_at is None
    client.get(URL)
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    recent = timezone.now() - dt.timedelta(seconds=30)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=recent)
    client.get(URL)
    assert ApiKey.objects.get(pk=key.pk).last_used_at == recent  # not rewritten within the minute
    old = timezone.now() - dt.timedelta(minutes=2)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=old)
    client.get(URL)
    assert ApiKey.objects.get(pk=key.pk).last_used_at > old


@pytest.fixture
def foreign_batch(other_team, routes):
    return submit_batch(team=other_team, items=[item(0), item(1)])


@pytest.mark.parametrize("method, path", ENDPOINTS[2:6])
def test_other_teams_batch_is_404(client, foreign_batch, method, path):
    response = call(client, method, path, batch_id=foreign_batch.id)
    assert response.status_code == 404
    assert response.json() == {"detail": "batch not found"}
    # the other team still sees it, untouched
    foreign_batch.refresh_from_db()
    assert foreign_batch.status == "queued"
    assert foreign_batch.items.filter(status="pending").count() == 2


def test_unknown_batch_id_is_404(client):
    assert client.get(f"/api/v1/batches/{uuid.uuid4()}").status_code == 404
    assert client.get("/api/v1/batches/not-a-uuid").status_code == 404


def test_list_shows_only_own_team(client, foreign_batch, team, routes):
    own = submit_batch(team=team, items=[item(0)])
    ids = [b["id"] for b in client.get(URL).json()["results"]]
    assert ids == [str(own.id)]


def test_throttle_per_key(client, team):
    rates = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api_key": "3/min"}}
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'second')[1]}")
    with override_settings(REST_FRAMEWORK=rates):
        codes = [client.get(URL).status_code for _ in range(4)]
        other_code = other.get(URL).status_code
        limited = client.get(URL)
    assert codes == [200, 200, 200, 429]
    assert other_code == 200  # a separate budget per key
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0
    assert "throttled" in limited.json()["detail"].lower()

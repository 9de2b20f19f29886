"""The config history names the API key and the team of an action taken through the API (it said
"anonymous" and "batch <team id> <id>" before)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from audit.models import ConfigChange
from batches import submission
from teams.caller import api_caller
from teams.services import create_api_key

pytestmark = pytest.mark.django_db


def test_an_api_cancel_names_the_key_and_the_team(team, make_provider, make_route, monkeypatch, client):
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)
    make_route("intent", make_provider("alpha"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'nightly-job')[1]}")
    batch = api.post("/api/v1/batches", {"items": [{"custom_id": "a", "route": "intent", "query": "q"}]},
                     format="json").json()  # fmt: skip
    assert api.post(f"/api/v1/batches/{batch['id']}/cancel").status_code == 200
    change = ConfigChange.objects.get(model="batch", action="cancelled")
    assert (change.actor, change.via) == (f"API key nightly-job (team {team.name})", "api")
    assert change.object_repr == f"{team.name} {batch['id']}"
    assert api_caller() is None  # the request's key is forgotten when it ends
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123456"))
    page = client.get(reverse("audit:history")).content.decode()
    assert f"API key nightly-job (team {team.name})" in page and "anonymous" not in page

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from .seed import ENV_SECRET, seed


@pytest.fixture
def staff_user(db):
    """An operator: staff in the "gateway operator" group (prompts and answers, retry, cancel)."""
    user = get_user_model().objects.create_user("ops", password="ops-pass-123", is_staff=True)
    user.groups.add(Group.objects.get(name="gateway operator"))
    return user


@pytest.fixture
def aggregate_only_staff(db):
    """is_staff and nothing else: aggregate pages only."""
    return get_user_model().objects.create_user("lookout", password="lookout-pass-123", is_staff=True)


@pytest.fixture
def plain_user(db):
    return get_user_model().objects.create_user("viewer", password="viewer-pass-123", is_staff=False)


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def seeded(db, monkeypatch):
    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    return seed()

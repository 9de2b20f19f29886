"""Fixtures for the first-hour tests (API paths, results filter, retry_failed)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import routes  # noqa: F401  (alpha/beta behind 'intent', as in the API tests)


@pytest.fixture
def client(api_key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


@pytest.fixture
def anon():
    return APIClient()

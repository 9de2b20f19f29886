"""Fixtures for the REST API tests: an authenticated client and a routable setup."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem


@pytest.fixture
def routes(make_provider, make_route):
    """alpha (enabled) and beta (enabled) behind route 'intent'; gamma disabled; 'dead' route → gamma only."""
    alpha = make_provider("alpha")
    beta = make_provider("beta")
    gamma = make_provider("gamma", enabled=False)
    make_route("intent", alpha)
    make_route("intent", beta, priority=1)
    make_route("dead", gamma)
    return {"alpha": alpha, "beta": beta, "gamma": gamma}


@pytest.fixture
def client(api_key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


@pytest.fixture
def anon():
    return APIClient()


@pytest.fixture
def row_counts():
    def counts() -> tuple[int, int]:
        return Batch.objects.count(), BatchItem.objects.count()

    return counts

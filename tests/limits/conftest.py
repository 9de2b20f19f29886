"""Fixtures for the team-limits tests: the simulator, an API client, and provider-side checks."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from bench.common import peak_burst
from sim.testing import sim_server  # noqa: F401 - fixture re-export


@pytest.fixture
def client(api_key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


def trace_arrivals(sim, provider: str, status: int | None = None) -> list[float]:
    """Arrival times (real seconds since the simulator's start) of the provider's requests, sorted."""
    return sorted(
        float(r["arrival_s"])
        for r in sim.trace()
        if r["provider"] == provider and (status is None or r["status"] == status)
    )


def worst_excess(arrivals: list[float], rate_per_s: float, capacity: float) -> float:
    """max over windows [t_i, t_j] of  count − (capacity + rate × (t_j − t_i)); ≤ 0 means every window
    conforms to a token bucket of that rate and capacity (starting full). -inf without arrivals."""
    return peak_burst(arrivals, rate_per_s) - capacity

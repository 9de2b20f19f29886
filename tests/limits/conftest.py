"""Fixtures for the team-limits tests: the simulator, an API client, and provider-side checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

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
    conforms to a token bucket of that rate and capacity (starting full)."""
    worst = float("-inf")
    for i in range(len(arrivals)):
        for j in range(i, len(arrivals)):
            worst = max(worst, (j - i + 1) - (capacity + rate_per_s * (arrivals[j] - arrivals[i])))
    return worst


ROOT = Path(__file__).resolve().parents[2]


def subprocess_env(**extra: str) -> dict:
    """Environment for a manage.py / celery subprocess on this test's database and Redis key space."""
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="gateway_site.settings.test",
        DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
        DJANGO_LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def manage(*args: str) -> str:
    """Run `python manage.py ARGS` in another process (cwd = this worktree); returns its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout

"""The client against the stack as deployed: one real uvicorn (``gateway_site.asgi:application``: the
REST API and the interactive lane on one port) and one real ``celery -A gateway_site worker`` with the
default pool, on this run's database and Redis, against the simulator. Both are started once for the
package's tests (tests/client/), the web process enqueueing its batches on the worker's queue."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim.testing import sim_server  # noqa: F401  (fixture)
from teams.services import create_api_key
from tests.interactive.conftest import settled, start_uvicorn, stop
from tests.scheduling.conftest import Workers

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "client"

try:  # installed by `make venv` (pip install -e './client[langchain]'); a venv made before that: the source
    import batch_gateway_client  # noqa: F401
except ImportError:  # pragma: no cover
    sys.path.insert(0, str(CLIENT_DIR))


@dataclass
class Stack:
    url: str
    workers: Workers


@pytest.fixture(scope="package")
def stack(django_db_setup, tmp_path_factory):
    """The gateway's base URL (uvicorn) and its worker set; the web process's batches go to the
    worker's queue (``CELERY_TASK_DEFAULT_QUEUE``), Celery not eager."""
    tmp = tmp_path_factory.mktemp("client-stack")
    # the provider batch of test_batch_options (the simulator turns it around in 0.3 s) is polled 0.1–0.5 s
    # apart, not from 30 s on, and the reconciler that kicks the polls passes every 3 s (lease / 3), not 20
    workers = Workers(
        tmp,
        GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS="0.1",
        GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS="0.5",
        GATEWAY_CLAIM_LEASE_SECONDS="9",
    )
    workers.start("client")
    proc, url = start_uvicorn(
        tmp / "uvicorn.log", CELERY_TASK_ALWAYS_EAGER="0", CELERY_TASK_DEFAULT_QUEUE=workers.queue
    )
    yield Stack(url, workers)
    stop(proc)
    workers.stop()


@pytest.fixture
def key(team):
    """A raw API key of ``team``, once the server sees the rows made before it (``settled``)."""

    def make() -> str:
        raw = create_api_key(team, "client")[1]
        settled()
        return raw

    return make


def sim_provider(sim_server, make_provider, name="gpt", **overrides):  # noqa: F811
    """A simulator provider at a generous quota, its Provider row and a route named ``chat`` to it."""
    sim_config = {"median_ms": 5, "sigma": 0.1, "max_concurrency": 50, **overrides.pop("sim", {})}
    sim = sim_server({"seed": 7, "providers": {name: sim_config}})
    values = dict(base_url=sim.provider_url(name), rpm=6000, tpm=10**7, max_concurrency=20, burst_seconds=2.0)
    values.update(overrides)
    return sim, make_provider(name, **values)

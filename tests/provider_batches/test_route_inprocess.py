"""The provider-batch route worked in this process (the due queue's slice, no Celery) against the
in-process simulator, real PostgreSQL and Redis: routing by option and window, one provider batch per
provider within its limits, results applied once through the one result writer, errored / expired /
refused lines back to real time. The assertions are on what the simulator saw (real-time requests, batch
lines per custom id) and on the stored rows."""

from __future__ import annotations

import pytest

from batches.models import BatchItem, ItemStatus, ServedVia
from batches.selectors import result_page
from provider_batches.models import ChunkState, ProviderBatch
from sim.testing import run_simulator_in_thread
from tests.exactly_once import assert_exactly_once

from .helpers import batch_provider, drive_until_done, items, sim_config, sim_provider, submit

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = sim_config(
    oa=sim_provider("openai"),
    an=sim_provider("anthropic"),
    az=sim_provider("azure_openai"),
)


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


@pytest.fixture(autouse=True)
def _fresh(sim, settings):
    sim.reset()
    settings.GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS = 0.05
    settings.GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS = 0.2


def realtime_calls(sim, name: str) -> int:
    return sum(sim.request_counts().get(name, {}).values())


@pytest.mark.parametrize("kind,name", [("openai", "oa"), ("anthropic", "an"), ("azure_openai", "az")])
def test_a_24h_batch_goes_through_one_provider_batch(team, make_provider, sim, kind, name):
    batch_provider(make_provider, sim, name, kind)
    batch = submit(team, items(200, name))
    assert BatchItem.objects.filter(batch=batch, served_via=ServedVia.PROVIDER_BATCH).count() == 200

    drive_until_done(batch)

    assert realtime_calls(sim, name) == 0
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert (chunk.state, chunk.line_count, chunk.applied_count) == (ChunkState.DONE, 200, 200)
    lines = sim.batch_lines()[name]
    assert len(lines) == 200 and set(lines.values()) == {1}
    results, _ = result_page(batch, limit=1000)
    assert {r["served_by"] for r in results} == {"provider_batch"}
    assert {r["status"] for r in results} == {"succeeded"}
    assert all(r["attempts"] == 1 for r in results)
    batch.refresh_from_db()
    assert batch.stats["providers"][name]["request_count"] == 200
    assert_exactly_once([batch], [sim])

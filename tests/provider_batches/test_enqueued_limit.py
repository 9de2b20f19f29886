"""``batch_max_enqueued_tokens`` is enforced when grouping (docs/provider_batches.md): the provider
batches open at once never hold more estimated input tokens than the limit, and the work beyond it
waits for the next provider batch. Worked in this process against the in-process simulator; the
assertions are on the stored chunks (their input tokens, when each was open) and on what the simulator
saw (every item's line exactly once, no real-time request)."""

from __future__ import annotations

import pytest

from batches.models import BatchItem, ItemStatus, ServedVia
from provider_batches.grouping import group_batch, item_tokens, next_group_due
from provider_batches.models import ChunkState, ProviderBatch
from providers.adapters import provider_config
from sim.testing import run_simulator_in_thread
from tests.exactly_once import assert_exactly_once

from .helpers import batch_provider, drive_until_done, items, sim_config, sim_provider, submit

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "y" * 400  # ~100 + a few input tokens per item


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(sim_config(oa=sim_provider("openai"))) as handle:
        yield handle


@pytest.fixture(autouse=True)
def _fresh(sim, settings):
    sim.reset()
    settings.GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS = 0.05
    settings.GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS = 0.2


def test_work_beyond_the_enqueued_limit_waits_for_the_next_provider_batch(team, make_provider, sim):
    provider = batch_provider(make_provider, sim, "oa", "openai", batch_max_enqueued_tokens=1000)
    batch = submit(team, items(25, "oa", text=TEXT))
    per_item = item_tokens(provider_config(provider), BatchItem.objects.filter(batch=batch).first())
    assert 100 <= per_item <= 110  # so at most 9 items fit under 1,000 tokens

    (first,) = ProviderBatch.objects.filter(batch=batch)  # grouped when the batch started
    assert first.line_count == 1000 // per_item and first.enqueued_tokens <= 1000
    left = BatchItem.objects.filter(
        batch=batch, status=ItemStatus.PENDING, served_via=ServedVia.PROVIDER_BATCH
    )
    assert left.count() == 25 - first.line_count
    assert group_batch(str(batch.id)) == [] and next_group_due() is None  # waits for the open chunk

    drive_until_done(batch)

    chunks = list(ProviderBatch.objects.filter(batch=batch).order_by("created_at"))
    per_chunk = 1000 // per_item
    assert [c.line_count for c in chunks] == [per_chunk, per_chunk, 25 - 2 * per_chunk]
    assert all(c.state == ChunkState.DONE and c.enqueued_tokens <= 1000 for c in chunks)
    for earlier, later in zip(chunks, chunks[1:], strict=False):
        assert later.created_at >= earlier.ended_at  # never two open at once: together over the limit
    lines = sim.batch_lines()["oa"]
    assert len(lines) == 25 and set(lines.values()) == {1}
    assert sum(sim.request_counts().get("oa", {}).values()) == 0  # nothing went to real time
    assert_exactly_once([batch], [sim])


def test_without_a_limit_one_provider_batch_takes_everything(team, make_provider, sim):
    batch_provider(make_provider, sim, "oa", "openai")
    batch = submit(team, items(25, "oa", text=TEXT))
    (chunk,) = ProviderBatch.objects.filter(batch=batch)  # grouped when the batch started
    assert chunk.line_count == 25 and chunk.enqueued_tokens > 1000
    drive_until_done(batch)

"""What a provider batch does not finish goes through real time (in this process: the due slice and the
single-process dispatcher), against the in-process simulator: errored lines, a provider batch that fails
validation, the deadline guard (turnaround longer than the window), and a gateway batch's cancel
mid-way. Asserted on what the simulator saw (batch lines and real-time requests per custom id) and the
stored rows."""

from __future__ import annotations

import pytest

from batches.execution.finalize import cancel_batch
from batches.models import BatchItem, ItemStatus
from provider_batches.models import ChunkState, ProviderBatch
from sim.testing import run_simulator_in_thread
from tests.exactly_once import assert_exactly_once
from tests.waiting import wait_until

from .helpers import batch_provider, drive_until_done, items, sim_config, sim_provider, submit

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = sim_config(
    oa_err=sim_provider("openai", batch_line_error_rate=0.3),
    an_err=sim_provider("anthropic", batch_line_error_rate=0.3),
    oa_fail=sim_provider("openai", batch_max_requests=5),  # the gateway's limit is 50,000: the file fails
    an_late=sim_provider("anthropic", turnaround_ms=1e9, batch_progress=True),
    oa_slow=sim_provider("openai", turnaround_ms=4_000_000, batch_progress=True),
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


def by_custom_id(counts: dict, name: str) -> dict[str, int]:
    return dict(counts.get(name, {}))


@pytest.mark.parametrize("name,kind", [("oa_err", "openai"), ("an_err", "anthropic")])
def test_errored_lines_are_retried_in_real_time(team, make_provider, sim, name, kind):
    batch_provider(make_provider, sim, name, kind)
    batch = drive_until_done(submit(team, items(60, name)))
    assert set(BatchItem.objects.filter(batch=batch).values_list("status", flat=True)) == {
        ItemStatus.SUCCEEDED
    }
    realtime = by_custom_id(sim.request_counts(), name)
    assert 0 < len(realtime) < 60  # only the errored lines went again, in real time
    retried = BatchItem.objects.filter(batch=batch, custom_id__in=list(realtime))
    assert {i.attempts for i in retried} == {2}  # the line + the real-time request
    assert {i.served_via for i in retried} == {""}
    assert_exactly_once([batch], [sim])


def test_a_provider_batch_that_fails_validation_sends_its_items_to_real_time(team, make_provider, sim):
    batch_provider(make_provider, sim, "oa_fail", "openai")
    batch = drive_until_done(submit(team, items(12, "oa_fail")))
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert (chunk.remote_state, chunk.realtime_count) == ("failed", 12)
    assert len(by_custom_id(sim.request_counts(), "oa_fail")) == 12
    assert set(BatchItem.objects.filter(batch=batch).values_list("status", flat=True)) == {
        ItemStatus.SUCCEEDED
    }
    assert_exactly_once([batch], [sim])


# openai: the same with a real worker (test_workers.py)
@pytest.mark.parametrize("name,kind", [("an_late", "anthropic")])
def test_deadline_guard_sends_the_rest_through_real_time_before_expiry(
    team, make_provider, sim, settings, name, kind
):
    settings.GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS = 8.5  # of a 10 s window: fires after ~1 s
    batch_provider(make_provider, sim, name, kind, batch_min_window_seconds=10)
    batch = drive_until_done(submit(team, items(30, name), window="10s"))
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert chunk.cancel_reason == "deadline" and chunk.realtime_count > 0
    rows = list(BatchItem.objects.filter(batch=batch))
    assert {r.status for r in rows} == {ItemStatus.SUCCEEDED}
    assert all(r.finished_at <= batch.expires_at for r in rows)
    assert len(by_custom_id(sim.request_counts(), name)) == chunk.realtime_count
    assert_exactly_once([batch], [sim])


def test_cancel_mid_way_cancels_the_provider_batch_and_applies_its_partial_output(team, make_provider, sim):
    from provider_batches.due import work_slice

    batch_provider(make_provider, sim, "oa_slow", "openai")
    batch = submit(team, items(40, "oa_slow"))

    def some_lines_done() -> bool:
        work_slice()
        chunk = ProviderBatch.objects.filter(batch=batch).first()
        return chunk is not None and chunk.succeeded_count >= 5

    wait_until(some_lines_done, timeout=30, what="part of the provider batch to finish")
    cancel_batch(str(batch.id))
    drive_until_done(batch)
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    assert chunk.state == ChunkState.DONE and chunk.remote_state == "cancelled"
    statuses = list(BatchItem.objects.filter(batch=batch).values_list("status", flat=True))
    assert statuses.count(ItemStatus.SUCCEEDED) >= 5 and statuses.count(ItemStatus.CANCELLED) >= 1
    assert set(statuses) == {ItemStatus.SUCCEEDED, ItemStatus.CANCELLED}
    assert sim.request_counts().get("oa_slow", {}) == {}  # nothing went real time
    assert sim.counters()["providers"]["oa_slow"].get("batches_cancelled", 1) >= 1
    assert_exactly_once([batch], [sim])

"""The provider-batch route worked in this process (the due queue's slice, no Celery) against the
in-process simulator, real PostgreSQL and Redis: routing by option and window, one provider batch per
provider within its limits, results applied once through the one result writer, errored / expired /
refused lines back to real time. The assertions are on what the simulator saw (real-time requests, batch
lines per custom id) and on the stored rows."""

from __future__ import annotations

import pytest

from batches.models import BatchItem, ServedVia
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


# openai and anthropic: the same with real workers and 2,000 items (test_workers.py)
@pytest.mark.parametrize("kind,name", [("azure_openai", "az")])
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


def test_auto_without_a_long_enough_window_stays_real_time(team, make_provider, sim):
    batch_provider(make_provider, sim, "oa", "openai")
    short = submit(team, items(3, "oa"), window="1h")  # < the 24 h turnaround
    none = submit(team, items(3, "oa"), window=None)
    never = submit(team, items(3, "oa"), window="24h", mode="never")
    for b in (short, none, never):
        assert not BatchItem.objects.filter(batch=b, served_via=ServedVia.PROVIDER_BATCH).exists()
    assert not ProviderBatch.objects.exists()


def test_always_without_a_window_uses_the_batch_api(team, make_provider, sim):
    batch_provider(make_provider, sim, "an", "anthropic")
    batch = drive_until_done(submit(team, items(5, "an"), window=None, mode="always"))
    assert ProviderBatch.objects.filter(batch=batch).count() == 1
    assert realtime_calls(sim, "an") == 0
    assert_exactly_once([batch], [sim])


def test_splitting_by_count_and_by_bytes(team, make_provider, sim):
    provider = batch_provider(make_provider, sim, "oa", "openai", batch_max_requests=500)
    short = drive_until_done(submit(team, items(1200, "oa")))
    counts = sorted(ProviderBatch.objects.filter(batch=short).values_list("line_count", flat=True))
    assert counts == [200, 500, 500]
    provider.batch_max_bytes = 64 * 1024
    provider.save()
    long_batch = drive_until_done(submit(team, items(40, "oa", text="x" * 6000)))
    chunks = list(ProviderBatch.objects.filter(batch=long_batch))
    assert len(chunks) >= 4 and all(c.input_bytes <= 64 * 1024 for c in chunks)
    for b in (short, long_batch):
        ids = [i for c in ProviderBatch.objects.filter(batch=b) for i in c.item_ids]
        assert len(ids) == len(set(ids)) == b.total_count  # each item in exactly one provider batch
    lines = sim.batch_lines()["oa"]
    assert len(lines) == 1240 and set(lines.values()) == {1}
    assert_exactly_once([short, long_batch], [sim])


def test_always_with_a_provider_without_batch_api_is_refused_naming_the_field(
    team, make_provider, make_route, sim
):
    from batches.models import Batch
    from batches.submission.errors import SubmissionError

    a = batch_provider(make_provider, sim, "oa", "openai")
    b = make_provider("plain", base_url=sim.kind_url("plain", "openai"))
    make_route("mixed", a, priority=0)
    make_route("mixed", b, priority=1)
    with pytest.raises(SubmissionError) as refused:
        submit(team, [{"custom_id": "x", "route": "mixed", "query": "hi"}], mode="always")
    assert refused.value.status_code == 400
    assert [e.field for e in refused.value.errors] == ["provider_batch"]
    assert "plain" in refused.value.errors[0].message
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_provider_batches_are_visible_on_the_pages_and_in_the_metrics(team, make_provider, sim, client):
    from django.urls import reverse
    from prometheus_client import generate_latest

    from observability.views import metrics_registry
    from tests.factories import login_superuser
    from tests.observability.helpers import samples, value

    batch_provider(make_provider, sim, "oa", "openai")
    login_superuser(client)
    batch = drive_until_done(submit(team, items(7, "oa")))
    (chunk,) = ProviderBatch.objects.filter(batch=batch)
    open_one = ProviderBatch.objects.create(batch=batch, provider="oa", kind="openai", line_count=9,
                                            state=ChunkState.SUBMITTED)  # fmt: skip
    page = client.get(reverse("dashboard:providers")).content.decode()
    assert 'data-provider="oa"><td>oa</td><td class="n">1</td><td class="n">9</td>' in page
    open_one.delete()
    page = client.get(reverse("dashboard:batch_detail", args=[batch.id])).content.decode()
    assert chunk.id in page and "Provider batches" in page and "saved vs real time" in page
    parsed = samples(generate_latest(metrics_registry()).decode())
    assert value(parsed, "gateway_provider_batches", provider="oa", state="done") == 1
    assert value(parsed, "gateway_provider_batch_lines", provider="oa", outcome="applied") == 7


def test_the_budget_holds_the_discounted_estimate_and_ends_at_the_reported_usage(
    team, make_provider, sim, redis_sync
):
    from django.db.models import Sum

    from provider_batches import budget
    from providers.limits.budgets import budget_usage

    batch_provider(make_provider, sim, "oa", "openai")
    team.daily_token_budget, team.monthly_token_budget = 10_000_000, 100_000_000
    team.save()
    assert [n for _, _, n in budget_usage(team)] == [0, 0]
    held = []
    real_hold = budget.hold

    def spy(row, config):
        ok = real_hold(row, config)
        held.append(ProviderBatch.objects.get(id=row.id).reserved_tokens)
        return ok

    budget.hold = spy
    try:
        batch = drive_until_done(submit(team, items(20, "oa", max_tokens=50)))
    finally:
        budget.hold = real_hold
    # 20 lines × (prompt estimate + 50 max_tokens) × 0.5
    assert len(held) == 1 and 500 <= held[0] <= 20 * 60
    used = BatchItem.objects.filter(batch=batch).aggregate(t=Sum("total_tokens"))["t"]
    assert [n for _, _, n in budget_usage(team)] == [used, used]  # the hold given back, usage charged
    assert ProviderBatch.objects.get(batch=batch).reserved_tokens == 0


def embedding_items(n: int, provider: str) -> list[dict]:
    """Half one input, half a list of two: 1.5 × n inputs."""
    return [
        {"custom_id": f"e{i}", "provider": provider, "endpoint": "embeddings",
         "input": f"chunk {i}" if i % 2 else [f"first {i}", f"second {i}"]}
        for i in range(n)
    ]  # fmt: skip


def test_embedding_items_go_through_openais_batch_api_in_a_provider_batch_of_their_own(
    team, make_provider, sim
):
    batch_provider(make_provider, sim, "oa", "openai")
    batch = submit(team, embedding_items(40, "oa") + items(10, "oa"))
    assert BatchItem.objects.filter(batch=batch, served_via=ServedVia.PROVIDER_BATCH).count() == 50

    drive_until_done(batch)

    assert realtime_calls(sim, "oa") == 0  # a refused line or file would have come back in real time
    chunks = ProviderBatch.objects.filter(batch=batch)
    assert sorted(c.line_count for c in chunks) == [10, 40]  # one provider batch per endpoint
    assert all(c.state == ChunkState.DONE for c in chunks)
    seen = sim.provider_counters("oa")
    assert seen["batches_created"] == 2 and seen["batch_embedding_inputs"] == 60
    results = {r["custom_id"]: r for r in result_page(batch, limit=1000)[0]}
    for i in range(40):
        r = results[f"e{i}"]
        assert (r["status"], r["served_by"], r["attempts"]) == ("succeeded", "provider_batch", 1)
        assert r["response"]["object"] == "list" and len(r["response"]["data"]) == (1 if i % 2 else 2)
        assert r["usage"]["completion_tokens"] == 0 and r["usage"]["prompt_tokens"] > 0
    assert results["c0"]["response"]["object"] == "chat.completion"
    assert_exactly_once([batch], [sim])


def test_azures_batch_api_takes_no_embeddings_lines_they_go_in_real_time_and_always_is_refused(
    team, make_provider, sim
):
    from batches.submission import SubmissionError

    batch_provider(make_provider, sim, "az", "azure_openai")
    batch = submit(team, embedding_items(4, "az") + items(2, "az"))
    by_path = {i.custom_id: i.served_via for i in BatchItem.objects.filter(batch=batch)}
    assert {by_path[f"e{i}"] for i in range(4)} == {ServedVia.REALTIME}
    assert {by_path["c0"], by_path["c1"]} == {ServedVia.PROVIDER_BATCH}
    with pytest.raises(SubmissionError) as refused:
        submit(team, embedding_items(2, "az"), mode="always")
    (error,) = refused.value.errors
    assert (
        error.field == "provider_batch" and "takes chat lines only" in error.message and "az" in error.message
    )

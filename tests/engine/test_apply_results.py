"""The one result writer (batches.execution.apply): a result served outside the engine (here the
cache) is written, counted, finalizes its batch, charges the team's budget ledger and shows in the
metrics — once, however often it is applied; a result of an item another owner claims is dropped;
real-time results add nothing the engine already accounted. Real PostgreSQL and Redis."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from batches.execution import Applied, ServedBy, apply_result, apply_results, as_served
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from gateway_engine import ItemResult
from observability.views import metrics_registry
from providers.limits.budgets import budget_usage
from tests.factories import claim, make_batch
from tests.factories import work_item as q
from tests.observability.helpers import samples, value

pytestmark = pytest.mark.django_db(transaction=True)  # the accounting runs when the write commits

OWNER = "apply-writer"
PROVIDER = "cachep"


def answer(custom_id: str, prompt: int = 3, completion: int = 7) -> ItemResult:
    return ItemResult(
        custom_id,
        "succeeded",
        provider=PROVIDER,
        attempts=1,
        latency_ms=1,
        response={"content": f"cached {custom_id}"},
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
    )


def measured() -> tuple[float, float, float]:
    """(succeeded items, prompt tokens, completion tokens) of PROVIDER in the metrics registry."""
    parsed = samples(generate_latest(metrics_registry()).decode())
    return (
        value(parsed, "gateway_items_total", status="succeeded"),
        value(parsed, "gateway_provider_tokens_total", provider=PROVIDER, kind="prompt"),
        value(parsed, "gateway_provider_tokens_total", provider=PROVIDER, kind="completion"),
    )


def used(team) -> list[int]:
    return [n for _, _, n in budget_usage(team)]


@pytest.fixture
def budgeted(team, redis_sync, make_provider):
    make_provider(PROVIDER)
    team.daily_token_budget = 10_000
    team.monthly_token_budget = 100_000
    team.save()
    assert used(team) == [0, 0]  # the ledger exists (seeded from the database): a charge must show
    return team


def test_a_cache_served_result_is_written_counted_finalized_once_and_bills_nothing(budgeted):
    batch = make_batch(budgeted, [q("c", provider=PROVIDER)])
    (item,) = claim(str(batch.id), owner=OWNER)
    before = measured()

    assert apply_result(item, answer("c"), ServedBy.CACHE, OWNER) == Applied(written=1, dropped=0)

    row = BatchItem.objects.get(id=item.id)
    assert (row.status, row.response, row.claimed_by, row.total_tokens) == (
        ItemStatus.SUCCEEDED,
        {"content": "cached c"},
        "",
        10,
    )
    batch.refresh_from_db()
    assert (batch.completed_count, batch.status) == (1, BatchStatus.COMPLETED)
    assert batch.completed_at is not None  # its last item: finalized by the writer
    assert row.served_by == "cache" and batch.stats["cache_hits"] == 1
    # a cache hit made no call: its usage stays in the RESULT, but no budget, usage or token metric
    # counts it (docs/cache.md); the item itself is counted
    assert used(budgeted) == [0, 0]
    assert batch.stats["token_usage"]["prompt_tokens"] == 0 and batch.stats["providers"] == {}
    after = measured()
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 0, 0]

    # the same item's same result again: not written, nothing counted twice
    assert apply_result(item, answer("c"), ServedBy.CACHE, OWNER) == Applied(written=0, dropped=1)
    batch.refresh_from_db()
    assert batch.completed_count == 1
    assert used(budgeted) == [0, 0]
    assert measured() == after


def test_a_provider_batch_result_applied_in_bulk_twice_counts_once(budgeted):
    batch = make_batch(budgeted, [q(f"p{i}", provider=PROVIDER) for i in range(3)])
    items = claim(str(batch.id), owner=OWNER)
    entries = as_served([(i, answer(i.custom_id, 5, 5)) for i in items], ServedBy.PROVIDER_BATCH)
    before = measured()
    assert apply_results(str(batch.id), entries, OWNER) == Applied(written=3, dropped=0)
    assert apply_results(str(batch.id), entries, OWNER) == Applied(written=0, dropped=3)
    assert used(budgeted) == [30, 30]
    assert [a - b for a, b in zip(measured(), before, strict=True)] == [3, 15, 15]
    assert Batch.objects.get(id=batch.id).completed_at is not None


def test_a_result_for_an_item_another_owner_claims_is_dropped(budgeted):
    batch = make_batch(budgeted, [q("c", provider=PROVIDER)])
    (item,) = claim(str(batch.id), owner=OWNER)
    BatchItem.objects.filter(id=item.id).update(claimed_by="someone-else")
    before = measured()

    assert apply_result(item, answer("c"), ServedBy.CACHE, OWNER) == Applied(written=0, dropped=1)

    row = BatchItem.objects.get(id=item.id)
    assert (row.status, row.claimed_by, row.response) == (ItemStatus.RUNNING, "someone-else", None)
    batch.refresh_from_db()
    assert (batch.completed_count, batch.completed_at) == (0, None)
    assert used(budgeted) == [0, 0]
    assert measured() == before


def test_a_realtime_result_adds_nothing_the_engine_accounted(budgeted):
    """The engine settled the budget (admission) and counted the metrics (its observer); the
    dispatcher slice finalizes the batches it touched."""
    batch = make_batch(budgeted, [q("c", provider=PROVIDER)])
    (item,) = claim(str(batch.id), owner=OWNER)
    before = measured()

    assert apply_result(item, answer("c"), ServedBy.REALTIME, OWNER) == Applied(written=1, dropped=0)

    batch.refresh_from_db()
    assert (batch.completed_count, batch.completed_at) == (1, None)
    assert used(budgeted) == [0, 0]
    assert measured() == before

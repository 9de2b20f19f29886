"""Pages stay on a fixed number of queries with a 10,000-item batch (aggregates, no per-item queries)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus

from .seed import FAILURES, make_items, stats_for

N_ITEMS = 10_000


@pytest.fixture
def big_batch(seeded):
    now = timezone.now()
    batch = Batch.objects.create(
        team=seeded.teams["acme"],
        status=BatchStatus.RUNNING,
        total_count=N_ITEMS,
        started_at=now - dt.timedelta(minutes=5),
    )
    make_items(batch, N_ITEMS, now=now, failures=FAILURES * 100, running=500)  # 700 failed, 500 in flight
    failed = BatchItem.objects.filter(batch=batch, status=ItemStatus.FAILED).count()
    batch.failed_count = failed
    batch.completed_count = N_ITEMS - failed - 500
    batch.stats = stats_for(batch)
    batch.save()
    return batch


# session + user are 2 of these; the rest are the page's own aggregates. The batch and item pages also
# check the operator's permissions (2 queries: the user's and its groups', cached for the request), and
# the item page records the read in the config history (1 insert). The batch page also reads its webhook
# event (1; its attempts are 1 more when there is one, issue #26) and lists its provider batches, and the
# providers page the enqueued provider-batch work (1 query each, #23).
BUDGETS = {
    "batch_detail": 14,
    "batch_detail_page_5": 14,
    "batches": 8,
    "failures": 12,  # + 2: the content permission (user and group permissions: custom_ids need it)
    "failures_filtered": 12,
    "item": 7,
    "providers": 9,
    "usage": 9,
}


def _url(name, batch, seeded):
    item = BatchItem.objects.filter(batch=batch, status=ItemStatus.FAILED).order_by("seq").first()
    return {
        "batch_detail": reverse("dashboard:batch_detail", args=[batch.pk]),
        "batch_detail_page_5": reverse("dashboard:batch_detail", args=[batch.pk]) + "?page=5",
        "batches": reverse("dashboard:batches"),
        "failures": reverse("dashboard:failures") + "?window=all",
        "failures_filtered": reverse("dashboard:failures")
        + f"?window=24h&provider=alpha&error_class=5xx&team={seeded.teams['acme'].pk}",
        "item": reverse("dashboard:item_detail", args=[item.pk]),
        "providers": reverse("dashboard:providers"),
        "usage": reverse("dashboard:usage"),
    }[name]


def test_every_page_query_count_is_bounded_with_10k_items(
    staff_client, seeded, big_batch, django_assert_max_num_queries
):
    """One 10k-item fixture, every page under its own budget (the budget does not grow with items)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    measured = {}
    for page in sorted(BUDGETS):
        url = _url(page, big_batch, seeded)
        with django_assert_max_num_queries(BUDGETS[page]), CaptureQueriesContext(connection) as ctx:
            response = staff_client.get(url)
        assert response.status_code == 200, page
        measured[page] = len(ctx.captured_queries)
    print("queries per page with 10k items:", measured)


def test_batch_detail_numbers_for_10k_items(staff_client, seeded, big_batch):
    response = staff_client.get(reverse("dashboard:batch_detail", args=[big_batch.pk]))
    ctx = response.context
    # progress comes from the counters, in-flight from the status GROUP BY
    assert ctx["summary"].total == N_ITEMS
    assert ctx["status_counts"]["running"] == 500
    assert ctx["status_counts"]["failed"] == 700
    # histogram covers every finished item exactly once
    hist = {label: n for label, n in zip(*_hist(ctx), strict=True)}
    assert sum(hist.values()) == N_ITEMS - 500
    # per-provider failed items by class add up to the failed items
    rows = {r.provider: r for r in ctx["providers"]}
    assert sum(sum(r.failed_by_class.values()) for r in rows.values()) == 700
    assert rows["alpha"].failed_by_class["5xx"] == 200
    assert rows["beta"].failed_by_class["4xx"] == 100
    assert rows["beta"].failed_by_class["429"] == 100
    assert rows["local"].failed_by_class["timeout"] == 100
    assert rows["local"].failed_by_class["connection"] == 100
    assert rows["alpha"].failed_by_class["other"] == 100
    # stats (attempt level) come through as written by the engine
    assert rows["alpha"].p95_latency_ms == 3900
    # failed items are paginated, 50 per page, in seq order
    assert len(ctx["page"].object_list) == 50
    assert ctx["page"].paginator.count == 700
    assert response["Content-Type"].startswith("text/html")
    assert b'http-equiv="refresh"' in response.content  # running → auto-refresh


def _hist(ctx):
    chart = str(ctx["latency_chart"])
    assert chart.startswith("<svg")
    from dashboard.selectors.batch_detail import latency_histogram

    data = latency_histogram(ctx["batch"])
    return [label for label, _ in data], [n for _, n in data]

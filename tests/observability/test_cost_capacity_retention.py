"""Cost next to tokens (usage API, usage page and CSV, batch stats), the capacity advisor, retention."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem, ItemStatus, TeamUsageDaily
from batches.scheduling.capacity import advise, suggested_concurrency
from providers.pricing import Prices, add_stats_costs, sum_usage_costs
from teams.services import create_api_key

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 1)


@pytest.fixture
def priced(make_provider):
    make_provider("alpha", price_prompt_per_million="2.5", price_completion_per_million="10")
    make_provider("beta")  # no prices: unknown cost


@pytest.fixture
def usage(team, priced):
    TeamUsageDaily.objects.create(team=team, provider="alpha", day=DAY, requests=4, prompt_tokens=1_000_000,
                                  completion_tokens=200_000, wasted_tokens=400_000)  # fmt: skip
    TeamUsageDaily.objects.create(team=team, provider="beta", day=DAY + dt.timedelta(days=1), requests=1,
                                  prompt_tokens=10, completion_tokens=5)  # fmt: skip


def api(team):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 't')[1]}")
    return c


def test_usage_api_shows_cost_with_wasted_and_null_for_unknown_price(team, usage):
    by_provider = api(team).get("/api/v1/usage", {"group_by": "provider"}).json()
    rows = {r["provider"]: r for r in by_provider["results"]}
    # alpha: 1M prompt × 2.5 + 0.2M completion × 10 + 0.4M wasted at the prompt price × 2.5
    assert rows["alpha"]["cost"] == pytest.approx(2.5 + 2.0 + 1.0)
    assert rows["alpha"]["wasted_cost"] == pytest.approx(1.0)
    assert (
        rows["beta"]["cost"] is None and rows["beta"]["wasted_cost"] == 0
    )  # no wasted tokens, no price needed
    assert by_provider["totals"]["cost"] is None  # one provider's price is unknown
    by_day = api(team).get("/api/v1/usage", {"group_by": "day", "to": DAY.isoformat()}).json()
    assert [(r["day"], r["cost"]) for r in by_day["results"]] == [("2026-11-01", pytest.approx(5.5))]
    assert by_day["totals"]["cost"] == pytest.approx(5.5)


def test_usage_page_and_csv_show_cost(team, usage, client):
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123456")
    client.force_login(user)
    query = {"date_from": DAY.isoformat(), "date_to": (DAY + dt.timedelta(days=2)).isoformat()}
    page = client.get(reverse("dashboard:usage"), query).content.decode()
    assert "Cost per team per provider" in page and "5.5000" in page and "unknown" in page
    csv_text = b"".join(client.get(reverse("dashboard:usage_csv"), query).streaming_content).decode()
    lines = [line.split(",") for line in csv_text.strip().splitlines()]
    # the prompt-cache columns come last (#21): every earlier column keeps its place
    # then the provider-batch split (appended after them), then the endpoint (#39)
    assert lines[0][-9:-5] == ["cost", "wasted_cost", "cached_tokens", "cache_write_tokens"]
    assert lines[0][-1] == "endpoint"
    by_provider = {line[2]: line for line in lines[1:]}
    assert by_provider["alpha"][-9:-5] == ["5.500000", "1.000000", "0", "0"]
    assert by_provider["beta"][-9:-5] == ["", "0.000000", "0", "0"]
    assert by_provider["alpha"][-1] == "chat"


def test_batch_stats_cost_from_prices():
    stats = {
        "providers": {
            "alpha": {
                "prompt_tokens": 2_000_000,
                "completion_tokens": 100_000,
                "retry_extra_tokens": 1_000_000,
            },
            "beta": {"prompt_tokens": 5, "completion_tokens": 0, "retry_extra_tokens": 0},
        },
        "token_usage": {},
    }
    prices = {"alpha": Prices(1, 4)}
    add_stats_costs(stats, prices)
    assert stats["providers"]["alpha"]["cost"] == pytest.approx(2.0 + 0.4 + 1.0)
    assert stats["providers"]["alpha"]["wasted_cost"] == pytest.approx(1.0)
    assert stats["providers"]["beta"]["cost"] is None
    assert stats["token_usage"]["cost"] is None and stats["token_usage"]["wasted_cost"] == pytest.approx(1.0)
    assert sum_usage_costs([]) == {
        "cost": 0.0,
        "wasted_cost": 0.0,
        "realtime_cost": 0.0,
        "provider_batch_cost": 0.0,
    }


def test_finished_batch_object_shows_cost(team, priced):
    from batches.execution import finalize_batch_if_done

    batch = Batch.objects.create(team=team, total_count=1, status="running", started_at=timezone.now())
    BatchItem.objects.create(
        batch=batch, seq=0, custom_id="x", requested_provider="alpha", payload={}, status=ItemStatus.SUCCEEDED,
        provider="alpha", attempts=2, latency_ms=10, prompt_tokens=400_000, completion_tokens=100_000,
        total_tokens=500_000, retry_extra_tokens=400_000,
        attempt_log=[
            {"provider": "alpha", "status_code": 500, "error_type": "server_error", "latency_ms": 5,
             "prompt_tokens": 400_000, "completion_tokens": 0, "tokens": 400_000, "used": False, "at": ""},
            {"provider": "alpha", "status_code": 200, "error_type": "", "latency_ms": 10,
             "prompt_tokens": 400_000, "completion_tokens": 100_000, "tokens": 500_000, "used": True, "at": ""},
        ],
    )  # fmt: skip
    assert finalize_batch_if_done(str(batch.id))
    body = api(team).get(f"/api/v1/batches/{batch.id}").json()
    # 0.4M × 2.5 + 0.1M × 10 = 2.0, plus 0.4M wasted at 2.5 = 1.0
    assert body["stats"]["providers"]["alpha"]["cost"] == pytest.approx(3.0)
    assert body["stats"]["token_usage"]["cost"] == pytest.approx(3.0)
    assert body["stats"]["token_usage"]["wasted_cost"] == pytest.approx(1.0)


# ---- capacity advisor ----------------------------------------------------------------------------


def test_advisor_rule_and_verdicts():
    assert suggested_concurrency(2000, 60) == 3  # 2 s × 1 rps × 1.2 = 2.4 → 3
    assert suggested_concurrency(500, 600) == 6
    low = advise("a", p50_latency_ms=2000, samples=50, rpm=600, max_concurrency=4, leases_in_flight=4,
                 rpm_fill_pct=95)  # fmt: skip
    assert (low.verdict, low.suggested) == ("too_low", 24)
    assert "leases saturated" in low.reason and "RPM bucket full" in low.reason
    high = advise("b", p50_latency_ms=100, samples=50, rpm=60, max_concurrency=20)
    assert (high.verdict, high.suggested) == ("too_high", 1)
    assert advise("c", p50_latency_ms=1000, samples=9, rpm=300, max_concurrency=6).verdict == "ok"
    assert advise("d", p50_latency_ms=None, samples=0, rpm=60, max_concurrency=2).verdict == "no_data"


def test_providers_page_flags_too_low_concurrency_from_observed_latency(client, team, make_provider):
    make_provider("slowp", rpm=600, max_concurrency=2)  # p50 2 s at 10 rps needs 24 slots
    make_provider("fastp", rpm=60, max_concurrency=30)  # p50 50 ms at 1 rps needs 1
    now = timezone.now()
    batch = Batch.objects.create(team=team, total_count=20, status="running", started_at=now)
    BatchItem.objects.bulk_create(
        [BatchItem(batch=batch, seq=i, custom_id=f"s{i}", payload={}, status=ItemStatus.SUCCEEDED,
                   provider="slowp", latency_ms=1900 + 20 * i, finished_at=now) for i in range(11)]
        + [BatchItem(batch=batch, seq=100 + i, custom_id=f"f{i}", payload={}, status=ItemStatus.SUCCEEDED,
                     provider="fastp", latency_ms=50, finished_at=now) for i in range(5)]
    )  # fmt: skip
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123456")
    client.force_login(user)
    page = client.get(reverse("dashboard:providers")).content.decode()
    assert 'data-provider="slowp" data-verdict="too_low"' in page
    assert 'data-provider="fastp" data-verdict="too_high"' in page
    assert "raise to 24" in page  # p50 = 2000 ms (median of 1900…2100)


# ---- retention -----------------------------------------------------------------------------------


def test_purge_old_data_keeps_stats_and_usage(team):
    now = timezone.now()
    old = Batch.objects.create(team=team, total_count=2, status="completed", completed_at=now - dt.timedelta(days=40),
                               stats={"success_count": 2, "token_usage": {"prompt_tokens": 7}})  # fmt: skip
    recent = Batch.objects.create(
        team=team, total_count=1, status="completed", completed_at=now - dt.timedelta(days=2)
    )
    running = Batch.objects.create(team=team, total_count=1, status="running")
    for b, n in ((old, 2), (recent, 1), (running, 1)):
        for i in range(n):
            BatchItem.objects.create(batch=b, seq=i, custom_id=f"{b.pk}-{i}", status=ItemStatus.SUCCEEDED,
                                     payload={"messages": [{"role": "user", "content": "secret prompt"}]},
                                     response={"choices": [{"message": {"content": "answer"}}]},
                                     prompt_tokens=3, completion_tokens=4, provider="alpha")  # fmt: skip
    TeamUsageDaily.objects.create(team=team, provider="alpha", day=(now - dt.timedelta(days=40)).date(),
                                  prompt_tokens=7)  # fmt: skip

    out = StringIO()
    call_command("purge_old_data", "--days", "30", "--dry-run", stdout=out)
    assert "would purge 2 items" in out.getvalue()
    assert BatchItem.objects.filter(batch=old, response__isnull=True).count() == 0

    out = StringIO()
    call_command("purge_old_data", "--days", "30", stdout=out)
    assert "purged 2 items" in out.getvalue()
    for item in BatchItem.objects.filter(batch=old):
        assert item.response is None and set(item.payload) == {"purged_at"}
        assert (item.status, item.prompt_tokens, item.completion_tokens) == (ItemStatus.SUCCEEDED, 3, 4)
    assert all(i.response is not None for i in BatchItem.objects.exclude(batch=old))
    old.refresh_from_db()
    assert old.stats == {"success_count": 2, "token_usage": {"prompt_tokens": 7}}
    assert TeamUsageDaily.objects.get(team=team).prompt_tokens == 7

    out = StringIO()
    call_command("purge_old_data", "--days", "30", stdout=out)  # again: nothing left to do
    assert "purged 0 items" in out.getvalue()


def test_purge_old_data_off_by_default(settings):
    settings.GATEWAY_RETENTION_DAYS = 0
    out = StringIO()
    call_command("purge_old_data", stdout=out)
    assert "retention is off" in out.getvalue()

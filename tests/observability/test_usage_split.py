"""The usage split (docs/provider_batches.md "Visible"): /api/v1/usage, the usage CSV and the usage
page show real-time and provider-batch tokens and cost apart; items that failed before reaching any
provider count in items_failed; a result applied after its batch was finalized is added to
TeamUsageDaily."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from batches import execution
from batches.execution.served import Served, ServedBy
from batches.models import Batch, BatchItem, ItemStatus, TeamUsageDaily
from gateway_engine import ItemResult
from teams.services import create_api_key
from tests.factories import claim, make_batch

pytestmark = pytest.mark.django_db


def _entry(provider, prompt, completion, served_by=None):
    entry = {"provider": provider, "status_code": 200, "error_type": "", "latency_ms": 5, "prompt_tokens": prompt,
             "completion_tokens": completion, "tokens": prompt + completion, "used": True, "at": "x"}  # fmt: skip
    if served_by:
        entry["served_by"] = served_by
    return entry


def _result(item, prompt, completion, served_by=None):
    return ItemResult(item.custom_id, "succeeded", provider="pb", attempts=1, latency_ms=5, response={},
                      prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                      attempt_log=[_entry("pb", prompt, completion, served_by)])  # fmt: skip


@pytest.fixture
def priced(make_provider):
    # 10 per million prompt, 20 per million completion; provider-batch work at half price
    return make_provider("pb", price_prompt_per_million="10", price_completion_per_million="20",
                         batch_price_factor=0.5)  # fmt: skip


def _api(team):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 't')[1]}")
    return c


def _finished_batch(team):
    """Item r0: 100k + 50k tokens in real time; b0: 200k + 100k through the provider's batch API;
    x0: failed before any provider (budget_exceeded, 0 attempts)."""
    batch = make_batch(team, [{"custom_id": c, "provider": "pb", "query": "q"} for c in ("r0", "b0", "x0")])
    rows = {i.custom_id: i for i in claim(str(batch.id), owner="w")}
    served = [
        Served(rows["r0"], _result(rows["r0"], 100_000, 50_000), ServedBy.REALTIME),
        Served(rows["b0"], _result(rows["b0"], 200_000, 100_000, "provider_batch"), ServedBy.PROVIDER_BATCH),
        Served(
            rows["x0"],
            ItemResult("x0", "failed", error_type="budget_exceeded", error_message="no budget"),
            ServedBy.REALTIME,
        ),  # fmt: skip
    ]
    with django_capture_on_commit():
        assert execution.apply_results(str(batch.id), served, owner="w").written == 3
    execution.finalize_batch_if_done(str(batch.id))
    return batch


def django_capture_on_commit():
    from django.test import TestCase

    return TestCase.captureOnCommitCallbacks(execute=True)


def test_usage_api_splits_realtime_and_provider_batch_and_counts_unrouted_failures(team, priced):
    _finished_batch(team)
    usage = TeamUsageDaily.objects.get(team=team, provider="pb")
    assert (usage.provider_batch_prompt_tokens, usage.provider_batch_completion_tokens) == (200_000, 100_000)
    data = _api(team).get("/api/v1/usage", {"group_by": "provider"}).json()
    rows = {r["provider"]: r for r in data["results"]}
    pb = rows["pb"]
    assert (pb["realtime_prompt_tokens"], pb["realtime_completion_tokens"]) == (100_000, 50_000)
    assert (pb["provider_batch_prompt_tokens"], pb["provider_batch_completion_tokens"]) == (200_000, 100_000)
    # real time: 0.1M × 10 + 0.05M × 20 = 2.0; provider batch: (0.2M × 10 + 0.1M × 20) × 0.5 = 2.0
    assert pb["realtime_cost"] == pytest.approx(2.0) and pb["provider_batch_cost"] == pytest.approx(2.0)
    assert pb["cost"] == pytest.approx(4.0)
    # the budget_exceeded item never reached a provider: counted in items_failed all the same
    assert data["totals"]["items_failed"] == 1 and data["totals"]["items_succeeded"] == 2
    assert rows[""]["items_failed"] == 1 and rows[""]["requests"] == 0


def test_usage_csv_and_page_show_the_split(team, priced, client):
    _finished_batch(team)
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123456"))
    today = timezone.now().date()
    query = {"date_from": (today - dt.timedelta(days=1)).isoformat(), "date_to": today.isoformat()}
    csv_text = b"".join(client.get(reverse("dashboard:usage_csv"), query).streaming_content).decode()
    lines = [line.split(",") for line in csv_text.strip().splitlines()]
    header = lines[0]
    assert header[-5:] == ["provider_batch_prompt_tokens", "provider_batch_completion_tokens", "realtime_cost",
                           "provider_batch_cost", "endpoint"]  # fmt: skip
    by_provider = {line[2]: dict(zip(header, line, strict=True)) for line in lines[1:]}
    assert by_provider["pb"]["provider_batch_prompt_tokens"] == "200000"
    assert by_provider["pb"]["realtime_cost"] == "2.000000" == by_provider["pb"]["provider_batch_cost"]
    assert by_provider[""]["items_failed"] == "1"
    page = client.get(reverse("dashboard:usage"), query).content.decode()
    assert "provider-batch tokens" in page and "(before any provider)" in page
    assert "300,000" in page and "150,000" in page  # provider-batch and real-time tokens of pb


def test_a_result_applied_after_its_batch_was_finalized_is_added_to_the_usage(team, priced):
    batch = make_batch(team, [{"custom_id": c, "provider": "pb", "query": "q"} for c in ("a", "late")])
    rows = {i.custom_id: i for i in claim(str(batch.id), owner="w")}
    with django_capture_on_commit():
        execution.apply_results(
            str(batch.id), [Served(rows["a"], _result(rows["a"], 10, 5), ServedBy.REALTIME)], "w"
        )
    # the batch was finalized while "late" still ran in a provider batch (e.g. a finalize that raced it)
    BatchItem.objects.filter(custom_id="late").update(status=ItemStatus.SUCCEEDED)
    execution.finalize_batch_if_done(str(batch.id))
    BatchItem.objects.filter(custom_id="late").update(status=ItemStatus.RUNNING)
    assert Batch.objects.get(id=batch.id).completed_at is not None
    assert TeamUsageDaily.objects.get(team=team, provider="pb").prompt_tokens == 10
    late = Served(rows["late"], _result(rows["late"], 1000, 500, "provider_batch"), ServedBy.PROVIDER_BATCH)
    with django_capture_on_commit():
        assert execution.apply_results(str(batch.id), [late], owner="w").written == 1
    usage = TeamUsageDaily.objects.get(team=team, provider="pb")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.items_succeeded) == (1010, 505, 2)
    assert usage.provider_batch_prompt_tokens == 1000

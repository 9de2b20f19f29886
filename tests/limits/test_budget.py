"""Team token budgets end to end: real PostgreSQL, Redis and the simulator (eager Celery, one process).

Every item below is estimated at exactly what the simulator bills (prompt = ceil(chars / 4), completion
= max_tokens), so the numbers are exact: 3 prompt tokens + 250 = 253 tokens per item."""

from __future__ import annotations

import pytest
from django.conf import settings

from batches import submission
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from batches.submission import submit_batch

pytestmark = pytest.mark.django_db(transaction=True)

PER_ITEM = 253
BUDGET = 10_000


def items(prefix: str, n: int) -> list[dict]:
    # "question b00" is 12 characters → 3 prompt tokens
    return [
        {"custom_id": f"{prefix}{i:02d}", "provider": "bud", "query": f"question {prefix}{i:02d}",
         "params": {"max_tokens": 250}}
        for i in range(n)
    ]  # fmt: skip


@pytest.fixture
def setup(sim_server, make_provider, team, redis_sync):
    sim = sim_server({"providers": {"bud": {"median_ms": 5, "sigma": 0.1}}})
    make_provider("bud", base_url=sim.provider_url("bud"), rpm=60_000, tpm=10**8, max_concurrency=8)
    team.daily_token_budget = BUDGET
    team.monthly_token_budget = 10 * BUDGET
    team.save()
    return sim


def test_batch_stops_at_the_budget_and_the_next_submission_gets_429(
    setup, team, client, redis_sync, monkeypatch
):
    sim = setup
    # two batches, each within the remaining budget when submitted; both queued before either runs
    queued: list[str] = []
    monkeypatch.setattr(submission.enqueue, "enqueue_start", queued.append)
    a = submit_batch(team=team, items=items("a", 30))  # 7,590 tokens
    b = submit_batch(team=team, items=items("b", 30))  # 7,590 more: only 9 of them fit
    monkeypatch.undo()
    assert queued == [str(a.id), str(b.id)]
    submission.enqueue.enqueue_start(str(a.id))  # eager Celery: runs the batch here
    a.refresh_from_db()
    assert (a.status, a.completed_count) == (BatchStatus.COMPLETED, 30)
    submission.enqueue.enqueue_start(str(b.id))
    b.refresh_from_db()
    rows = list(BatchItem.objects.filter(batch=b))
    ok = [r for r in rows if r.status == ItemStatus.SUCCEEDED]
    over = [r for r in rows if r.error_type == "budget_exceeded"]
    # the ledger refuses exactly when the next item would pass the budget: 7,590 + 9 × 253 = 9,867
    assert len(ok) == (BUDGET - 30 * PER_ITEM) // PER_ITEM == 9
    assert len(over) == 21 and all(r.status == ItemStatus.FAILED and r.attempts == 0 for r in over)
    assert all("daily token budget of 10000" in r.error_message for r in over)
    assert b.status == BatchStatus.COMPLETED and b.completed_at is not None  # nothing else lost
    counters = sim.provider_counters("bud")
    # the provider never saw a refused item, and the team was billed no more than its budget
    assert counters["requests"] == 39 and counters["ok"] == 39
    assert counters["billed_tokens"] == 39 * PER_ITEM <= BUDGET

    # the next submission is refused at once with the budget in the body, and nothing is stored
    before = (Batch.objects.count(), BatchItem.objects.count())
    response = client.post("/api/v1/batches", {"items": items("c", 1)}, format="json")
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["errors"][0]["index"] is None and body["errors"][0]["field"] == "budget"
    assert "daily token budget" in body["errors"][0]["message"]
    assert body["budget"] == {"period": "day", "limit": BUDGET, "used": 9_867, "remaining": 133}
    assert (Batch.objects.count(), BatchItem.objects.count()) == before

    # a lost ledger (Redis restart) is re-seeded from the database: the same answer
    keys = list(redis_sync.scan_iter(match=f"{settings.GATEWAY_REDIS_PREFIX}budget:*"))
    assert len(keys) == 2  # the team's day and month
    redis_sync.delete(*keys)
    response = client.post("/api/v1/batches", {"items": items("c", 1)}, format="json")
    assert response.status_code == 429
    assert response.json()["budget"]["used"] == 9_867


def test_submission_over_the_budget_is_refused_before_anything_runs(setup, team, client):
    sim = setup
    team.daily_token_budget = 5_000
    team.save()
    response = client.post("/api/v1/batches", {"items": items("d", 20)}, format="json")  # 5,060
    assert response.status_code == 429
    assert response.json()["budget"] == {"period": "day", "limit": 5_000, "used": 0, "remaining": 5_000}
    assert Batch.objects.count() == 0
    assert sim.provider_counters("bud")["requests"] == 0
    # the monthly budget is checked too
    team.daily_token_budget = None
    team.monthly_token_budget = 1_000
    team.save()
    response = client.post("/api/v1/batches", {"items": items("d", 4)}, format="json")  # 1,012
    assert response.status_code == 429
    assert response.json()["budget"]["period"] == "month"
    response = client.post("/api/v1/batches", {"items": items("d", 3)}, format="json")  # 759
    assert response.status_code == 201


def test_team_admin_edits_limits_and_shows_usage(setup, team, admin_client):
    from django.urls import reverse

    url = reverse("admin:teams_team_change", args=[team.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    assert "day: 0 of 10,000 tokens" in page.content.decode()
    response = admin_client.post(
        url,
        {
            "name": team.name, "weight": "3", "daily_token_budget": "2000", "monthly_token_budget": "",
            "max_provider_share": "0.5", "max_waiting_calls": "50",
            "api_keys-TOTAL_FORMS": "0", "api_keys-INITIAL_FORMS": "0",
            "api_keys-MIN_NUM_FORMS": "0", "api_keys-MAX_NUM_FORMS": "1000",
        },
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    team.refresh_from_db()
    assert (team.weight, team.daily_token_budget, team.monthly_token_budget) == (3, 2000, None)
    assert (team.max_provider_share, team.max_waiting_calls) == (0.5, 50)
    bad = admin_client.post(
        url,
        {
            "name": team.name, "weight": "1", "daily_token_budget": "", "monthly_token_budget": "",
            "max_provider_share": "1.5", "max_waiting_calls": "50",
            "api_keys-TOTAL_FORMS": "0", "api_keys-INITIAL_FORMS": "0",
            "api_keys-MIN_NUM_FORMS": "0", "api_keys-MAX_NUM_FORMS": "1000",
        },
    )  # fmt: skip
    assert bad.status_code == 200 and "less than or equal to 1.0" in bad.content.decode()
    team.refresh_from_db()
    assert (team.max_provider_share, team.max_waiting_calls) == (0.5, 50)


def test_removing_the_budget_drops_the_ledger_and_a_new_budget_starts_from_the_database(
    setup, team, client, redis_sync, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        submit_batch(team=team, items=items("e", 10))  # 2,530 tokens, counted in the ledger
    prefix = f"{settings.GATEWAY_REDIS_PREFIX}budget:"
    assert len(list(redis_sync.scan_iter(match=prefix + "*"))) == 2
    team.daily_token_budget = team.monthly_token_budget = None
    with django_capture_on_commit_callbacks(execute=True):
        team.save()
    assert list(redis_sync.scan_iter(match=prefix + "*")) == []  # not counted while unbudgeted
    with django_capture_on_commit_callbacks(execute=True):
        submit_batch(team=team, items=items("f", 2))  # 506 tokens, not in any ledger
    assert list(redis_sync.scan_iter(match=prefix + "*")) == []
    team.daily_token_budget = 3_000
    with django_capture_on_commit_callbacks(execute=True):
        team.save()
    response = client.post("/api/v1/batches", {"items": items("g", 1)}, format="json")
    assert response.status_code == 429  # 2,530 + 506 used (from TeamUsageDaily) + 253 > 3,000
    assert response.json()["budget"] == {"period": "day", "limit": 3_000, "used": 3_036, "remaining": 0}

"""A small pipeline through the real dispatcher in this process (one dispatcher thread), real
PostgreSQL and Redis, and the simulator: what each step sent, how the label routed the summary, the
RESULT's steps, the stats of every step, a failing step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from batches import submission
from batches.execution import keepalive
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from batches.retry import retry_failed
from batches.selectors import iter_results
from dashboard.selectors.steps import step_rows

from .conftest import STEPS, docs, make_pipeline_providers, seen_once, sim_config, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def run(team, items, steps) -> Batch:
    batch = submission.submit_batch(team=team, items=items, steps=steps)  # starts the local dispatcher
    keepalive.ensure_local_dispatcher(background=True)
    try:
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(), 60, "the batch"
        )
    finally:
        wait_for(lambda: not keepalive._local_state["running"], 60, "the dispatcher thread to end")
    return Batch.objects.get(id=batch.id)


def test_two_steps_route_by_label_and_show_every_step(
    sim_server, make_provider, make_route, team, redis_sync
):
    sim = sim_server(sim_config())
    make_pipeline_providers(sim, make_provider, make_route)
    batch = run(team, docs(24), STEPS)
    assert batch.status == BatchStatus.COMPLETED and batch.completed_count == 24 and batch.total_count == 24
    results = list(iter_results(batch))
    for r in results:
        classify, summary = r["steps"]
        assert classify["name"] == "classify" and summary["name"] == "summary"
        assert classify["ok"] and summary["ok"] and r["ok"]
        assert classify["provider"] in ("clsa", "clsb")
        # the label picked the summary route: clsa's documents to suma, the rest to sumb
        assert summary["provider"] == ("suma" if classify["provider"] == "clsa" else "sumb")
        # the top-level fields are the last step's
        assert (r["provider"], r["attempts"], r["usage"]) == (summary["provider"], 1, summary["usage"])
        assert classify["usage"]["completion_tokens"] == 1 and summary["usage"]["completion_tokens"] == 4
    assert {r["steps"][0]["provider"] for r in results} == {"clsa", "clsb"}  # both labels occurred
    seen = seen_once(sim, results)
    # what each step sent: its template over the item's input and the classifier's answer
    tags = {(row["provider"], row["tag"]) for row in sim.trace()}
    for r in results:
        cid, classify = r["custom_id"], r["steps"][0]["provider"]
        assert (classify, f"cls:{cid}") in tags
        assert ("suma" if classify == "clsa" else "sumb", f"sum:{cid} label=[{classify}]") in tags
    # the stats count every step's requests and tokens per provider; items count once
    stats = batch.stats
    assert stats["success_count"] == 24 and stats["task_total"] == 24
    assert {p: s["request_count"] for p, s in stats["providers"].items()} == {
        p: sum(ids.values()) for p, ids in seen.items()
    }
    assert all(s["retry_count"] == 0 for s in stats["providers"].values())
    assert stats["token_usage"]["completion_tokens"] == 24 * (1 + 4)
    assert sum(s["items_succeeded"] for s in stats["providers"].values()) == 24


def test_a_failing_step_ends_the_item_with_its_error(
    sim_server, make_provider, make_route, team, redis_sync, client
):
    sim = sim_server(sim_config(sumb={"fixed_status": 400}))
    make_pipeline_providers(sim, make_provider, make_route)
    batch = run(team, docs(16), STEPS)
    results = {r["custom_id"]: r for r in iter_results(batch)}
    failed = [r for r in results.values() if not r["ok"]]
    assert failed and len(failed) < 16  # sumb's documents fail at their summary, suma's succeed
    for r in failed:
        classify, summary = r["steps"]
        assert classify["ok"] and classify["provider"] == "clsb"
        assert not summary["ok"] and summary["provider"] == "sumb"
        assert summary["error"]["type"] == "client_error" and r["error"] == summary["error"]
    assert batch.completed_count + batch.failed_count == 16 and batch.failed_count == len(failed)
    seen_once(sim, list(results.values()))
    # the batch page's pipeline table: every item classified, the failures at the summary step
    rows = step_rows(batch)
    assert [(r.name, r.reached, r.waiting, r.done, r.failed, r.ended) for r in rows] == [
        ("classify", 16, 0, 16, 0, 0),
        ("summary", 16, 0, 16 - len(failed), len(failed), 0),
    ]
    assert rows[1].target == "by answer: sum_a, sum_b"
    assert rows[1].answers == "[CLSA] tok  → sum_a, * → sum_b"  # the default last
    client.force_login(User.objects.create_user("ops", is_staff=True))
    page = client.get(reverse("dashboard:batch_detail", args=[batch.pk])).content.decode()
    assert "Pipeline steps" in page and "<code>summary</code>" in page
    assert "by answer: sum_a, sum_b" in page and "[CLSA]" not in page  # the answers are the team's content
    reader = User.objects.create_user("reader", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_content"))
    client.force_login(reader)
    page = client.get(reverse("dashboard:batch_detail", args=[batch.pk])).content.decode()
    assert "[CLSA] tok  → sum_a, * → sum_b" in page


def test_a_failed_first_step_runs_no_later_one(sim_server, make_provider, make_route, team, redis_sync):
    sim = sim_server(sim_config(clsa={"fixed_status": 400}, clsb={"fixed_status": 400}))
    make_pipeline_providers(sim, make_provider, make_route)
    batch = run(team, docs(6), STEPS)
    assert batch.status == BatchStatus.FAILED
    for r in iter_results(batch):
        assert [s["name"] for s in r["steps"]] == ["classify"] and not r["steps"][0]["ok"]
    assert not sim.request_counts().get("suma") and not sim.request_counts().get("sumb")
    assert set(BatchItem.objects.filter(batch=batch).values_list("step_index", "status")) == {
        (0, ItemStatus.FAILED)
    }


def test_retry_failed_runs_the_whole_pipeline_again(sim_server, make_provider, make_route, team, redis_sync):
    sim = sim_server(sim_config(sumb={"fixed_status": 400}))
    make_pipeline_providers(sim, make_provider, make_route)
    batch = run(team, docs(8), STEPS)
    failed = sorted(r["custom_id"] for r in iter_results(batch) if not r["ok"])
    assert failed
    sim.set_config(sim_config())  # sumb answers again
    retry = retry_failed(batch)
    assert retry.steps == batch.steps and retry.total_count == len(failed)
    keepalive.ensure_local_dispatcher(background=True)
    try:
        wait_for(
            lambda: Batch.objects.filter(id=retry.id, completed_at__isnull=False).exists(), 60, "the retry"
        )
    finally:
        wait_for(lambda: not keepalive._local_state["running"], 60, "the dispatcher thread to end")
    again = list(iter_results(Batch.objects.get(id=retry.id)))
    assert sorted(r["custom_id"] for r in again) == failed
    assert all(r["ok"] and [s["name"] for s in r["steps"]] == ["classify", "summary"] for r in again)


def test_retries_count_per_step(sim_server, make_provider, make_route, team, redis_sync, settings):
    """A classifier's and a summariser's first answers are 500s: the retried step's RESULT counts its own
    attempts, the item's top level the last step's, the stats every request once."""
    settings.GATEWAY_RETRY_BASE_SECONDS = 0.01
    sim = sim_server(sim_config(clsa={"status_script": [500, 500]}, suma={"status_script": [500]}))
    make_pipeline_providers(sim, make_provider, make_route)
    batch = run(team, docs(12), STEPS)
    assert batch.status == BatchStatus.COMPLETED and batch.completed_count == 12
    results = list(iter_results(batch))
    steps = [s for r in results for s in r["steps"]]
    assert sorted(s["attempts"] for s in steps if s["attempts"] > 1) == [2, 2, 2]  # the three retried steps
    assert all(r["attempts"] == r["steps"][-1]["attempts"] for r in results)
    seen = seen_once(sim, results)  # attempts per step == what each provider saw per custom id
    providers = batch.stats["providers"]
    assert {p: s["request_count"] for p, s in providers.items()} == {
        p: sum(i.values()) for p, i in seen.items()
    }
    assert {p: s["retry_count"] for p, s in providers.items() if s["retry_count"]} == {"clsa": 2, "suma": 1}
    assert (
        providers["clsa"]["errors_by_class"]["5xx"] == 2 and providers["suma"]["errors_by_class"]["5xx"] == 1
    )


@pytest.mark.slow  # waits out a 10 s completion window
def test_the_deadline_ends_the_later_steps(sim_server, make_provider, make_route, team, redis_sync):
    """A 10 s completion window with summarisers held to 6 requests a minute: every document is
    classified, most summaries are never sent and end expired, naming their step."""
    sim = sim_server(sim_config())
    slow = {"rpm": 6, "burst_seconds": 1, "max_concurrency": 1}
    make_pipeline_providers(sim, make_provider, make_route, suma=slow, sumb=slow)
    options = submission.BatchOptions(completion_window="10s", window=timedelta(seconds=10))
    batch = submission.submit_batch(team=team, items=docs(10), steps=STEPS, options=options)
    keepalive.ensure_local_dispatcher(background=True)
    try:
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(), 60, "the batch"
        )
    finally:
        wait_for(lambda: not keepalive._local_state["running"], 60, "the dispatcher thread to end")
    batch = Batch.objects.get(id=batch.id)
    results = list(iter_results(batch))
    assert batch.status == BatchStatus.EXPIRED and batch.expired_count >= 6
    assert all(r["steps"][0]["ok"] for r in results)  # every document was classified
    for r in results:
        if r["status"] == "expired":
            assert [s["name"] for s in r["steps"]] == ["classify", "summary"]
            assert r["steps"][-1]["error"]["type"] == "expired" and r["steps"][-1]["attempts"] == 0
    seen_once(sim, results)

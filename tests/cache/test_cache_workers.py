"""The response cache and in-flight dedup with real processes (issue #25 "Must show"): one
`celery -A gateway_site worker` (default prefork pool, two children) for the whole module, real
PostgreSQL and Redis, the simulator. What the provider saw is the simulator's request counts; every
batch is checked with assert_exactly_once (a cache hit's expected provider count is 0: attempts 0)."""

from __future__ import annotations

import pytest

from batches import submission
from batches.models import Batch, TeamUsageDaily
from batches.selectors import iter_results
from sim.testing import run_simulator_in_thread
from teams.services import create_team
from tests.exactly_once import assert_exactly_once
from tests.waiting import wait_until
from tests.workers import delete_queue, send_start_batch, start_worker, stop_worker, test_queue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SIM = {"time_scale": 1, "seed": 25, "providers": {"wc": {"model": "wc-m", "median_ms": 2, "sigma": 0.2}}}


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(SIM) as handle:
        yield handle


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory):
    queue = test_queue("cache")
    log = tmp_path_factory.mktemp("cache") / "worker.log"
    proc = start_worker("cache", queue, log, GATEWAY_DISPATCH_SLICE_SECONDS="5")
    yield queue, log
    stop_worker(proc)
    delete_queue(queue)


@pytest.fixture
def setup(sim, worker, make_provider, make_route, monkeypatch):
    sim.reset()
    queue, log = worker
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda bid: send_start_batch(bid, queue))
    wc = make_provider("wc", base_url=sim.provider_url("wc"), model="wc-m", rpm=600_000, tpm=10**9,
                       max_concurrency=32, max_retries=2)  # fmt: skip
    make_route("plain", wc)  # no cache on the route
    make_route("dd", wc, cache=True)
    return sim, log


def items(n: int, route: str, *, distinct: int | None = None, **params) -> list[dict]:
    distinct = distinct or n
    return [
        {"custom_id": f"i{i}", "route": route, "query": f"question {i % distinct}",
         "params": {"max_tokens": 8, **params}}
        for i in range(n)
    ]  # fmt: skip


def run(team, its, log, cache=None) -> Batch:
    batch = submission.submit_batch(team=team, items=its, options=submission.BatchOptions(cache=cache))

    def done():
        batch.refresh_from_db()
        return batch.completed_at is not None

    wait_until(done, 150, 0.2, what=f"batch {batch.id} to end", on_fail=lambda: log.read_text()[-3000:])
    assert batch.status == "completed", batch.status
    return batch


def calls(sim) -> int:
    return sum(sum(ids.values()) for ids in sim.request_counts().values())


def results(batch) -> dict[str, dict]:
    return {r["custom_id"]: r for r in iter_results(batch)}


@pytest.mark.timeout(300)
def test_a_500_item_batch_with_cache_true_makes_no_call_the_second_time(setup, team):
    sim, log = setup
    first = run(team, items(500, "plain", temperature=0.8), log, cache=True)
    assert calls(sim) == 500
    assert_exactly_once([first], [sim])
    billed = TeamUsageDaily.objects.get(team=team, provider="wc")

    sim.reset()
    second = run(team, items(500, "plain", temperature=0.8), log, cache=True)
    assert calls(sim) == 0  # no provider call
    assert_exactly_once([second], [sim])
    before, after = results(first), results(second)
    assert len(after) == 500
    for cid, r in after.items():
        assert (r["ok"], r["served_by"], r["attempts"]) == (True, "cache", 0), r
        assert (r["response"], r["usage"]) == (before[cid]["response"], before[cid]["usage"])
    assert second.stats["cache_hits"] == 500 and second.stats["providers"] == {}
    assert (
        second.stats["token_usage"]["prompt_tokens"] == second.stats["token_usage"]["completion_tokens"] == 0
    )
    again = TeamUsageDaily.objects.get(team=team, provider="wc")  # 0 billed tokens: usage unchanged
    assert (again.requests, again.prompt_tokens, again.completion_tokens) == (
        billed.requests, billed.prompt_tokens, billed.completion_tokens)  # fmt: skip

    sim.reset()  # the same batch without cache, on a route without cache, makes its calls
    plain = run(team, items(500, "plain", temperature=0.8), log)
    assert calls(sim) == 500 and plain.stats["cache_hits"] == 0
    assert_exactly_once([plain], [sim])

    sim.reset()  # another team does not see the first team's cache
    other, _ = create_team("initech")
    theirs = run(other, items(500, "plain", temperature=0.8), log, cache=True)
    assert calls(sim) == 500 and theirs.stats["cache_hits"] == 0
    assert_exactly_once([theirs], [sim])


@pytest.mark.timeout(300)
def test_100_items_of_which_10_distinct_make_10_calls_and_sampling_makes_100(setup, team):
    sim, log = setup
    deduped = run(team, items(100, "dd", distinct=10, temperature=0), log)  # the route's cache
    assert calls(sim) == 10
    assert_exactly_once([deduped], [sim])
    got = results(deduped)
    assert len(got) == 100 and all(r["ok"] for r in got.values())
    assert sum(r["served_by"] == "cache" for r in got.values()) == 90
    for i in range(100):
        assert got[f"i{i}"]["response"] == got[f"i{i % 10}"]["response"]

    sim.reset()
    sampled = run(team, items(100, "dd", distinct=10, temperature=1), log)
    assert calls(sim) == 100 and sampled.stats["cache_hits"] == 0
    assert_exactly_once([sampled], [sim])

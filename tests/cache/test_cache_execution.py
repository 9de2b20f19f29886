"""The response cache and in-flight dedup in batch execution, in this process: real PostgreSQL and
Redis, the simulator in a thread, dispatcher slices run here (docs/cache.md). What the provider saw is
read from the simulator's request counts; every test checks exactly-once."""

from __future__ import annotations

import pytest

from batches import execution
from batches.models import Batch, BatchItem, TeamUsageDaily
from batches.selectors import iter_results
from response_cache.models import CacheEntry, InFlight
from response_cache.services import lead
from sim.testing import run_simulator_in_thread
from tests.exactly_once import assert_exactly_once
from tests.factories import make_batch

# the cache's hits are accounted and finalized after their write commits (batches.execution.apply)
pytestmark = pytest.mark.django_db(transaction=True)

SIM = {"time_scale": 1, "seed": 5, "providers": {"cp": {"model": "cp-m", "median_ms": 2, "sigma": 0.1}}}


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(SIM) as handle:
        yield handle


@pytest.fixture
def cp(sim, make_provider, make_route):
    sim.reset()
    provider = make_provider(
        "cp", base_url=sim.provider_url("cp"), model="cp-m", rpm=60_000, tpm=10**9, max_concurrency=16
    )
    return provider


def items(n: int, *, distinct: int | None = None, target: dict, prefix: str = "c", **params) -> list[dict]:
    distinct = distinct or n
    return [
        {
            "custom_id": f"{prefix}{i}",
            **target,
            "query": f"question {i % distinct}",
            "params": {"max_tokens": 4, **params},
        }
        for i in range(n)
    ]


def run(batch: Batch) -> Batch:
    """Slices until nothing is left (what keepalive does: a slice ends when it has nothing in flight;
    followers given back by a failed leader are claimed by the next one)."""
    for _ in range(5):
        execution.DispatchSlice(10).run()
        if not execution.work_remains():
            break
    batch.refresh_from_db()
    assert batch.completed_at is not None, batch.status
    return batch


def results(batch: Batch) -> dict[str, dict]:
    return {r["custom_id"]: r for r in iter_results(batch)}


def sent(sim) -> int:
    return sum(sum(ids.values()) for ids in sim.request_counts().values())


def test_a_batch_with_cache_true_is_answered_from_the_cache_the_second_time(sim, cp, team, redis_sync):
    first = run(make_batch(team, items(20, target={"provider": "cp"}, temperature=1), cache=True))
    assert sent(sim) == 20
    assert_exactly_once([first.id], [sim])
    sim.reset()
    second = run(make_batch(team, items(20, target={"provider": "cp"}, temperature=1), cache=True))
    assert sent(sim) == 0  # no provider call
    assert_exactly_once([second.id], [sim])
    before, after = results(first), results(second)
    assert {r["served_by"] for r in after.values()} == {"cache"}
    assert {r["served_by"] for r in before.values()} == {"realtime"}
    for cid, r in after.items():
        assert r["ok"] and r["attempts"] == 0
        assert r["response"] == before[cid]["response"] and r["usage"] == before[cid]["usage"]
    assert second.stats["cache_hits"] == 20 and second.stats["providers"] == {}
    assert second.stats["token_usage"]["prompt_tokens"] == 0
    assert first.stats["cache_hits"] == 0
    usage = TeamUsageDaily.objects.get(team=team, provider="cp")
    assert usage.prompt_tokens == first.stats["token_usage"]["prompt_tokens"]  # only the first run billed
    assert usage.requests == 20


def test_another_team_does_not_see_the_first_teams_cache(sim, cp, team, other_team, redis_sync):
    run(make_batch(team, items(5, target={"provider": "cp"}), cache=True))
    sim.reset()
    theirs = run(make_batch(other_team, items(5, target={"provider": "cp"}), cache=True))
    assert sent(sim) == 5
    assert {r["served_by"] for r in results(theirs).values()} == {"realtime"}


def test_teams_share_entries_when_the_setting_allows(sim, cp, team, other_team, redis_sync, settings):
    settings.GATEWAY_CACHE_SHARED_ACROSS_TEAMS = True
    run(make_batch(team, items(5, target={"provider": "cp"}), cache=True))
    sim.reset()
    theirs = run(make_batch(other_team, items(5, target={"provider": "cp"}), cache=True))
    assert sent(sim) == 0 and theirs.stats["cache_hits"] == 5


def test_a_route_cache_serves_only_temperature_0_and_the_batch_field_wins(
    sim, cp, make_route, team, redis_sync
):
    rule = make_route("cr", cp, cache=True)
    run(make_batch(team, items(6, target={"route": "cr"}, temperature=0)))
    run(make_batch(team, items(6, target={"route": "cr"}, prefix="w", temperature=0.7)))
    sim.reset()
    hot = run(make_batch(team, items(6, target={"route": "cr"}, temperature=0)))
    warm = run(make_batch(team, items(6, target={"route": "cr"}, prefix="w", temperature=0.7)))
    refused = run(make_batch(team, items(6, target={"route": "cr"}, temperature=0), cache=False))
    assert hot.stats["cache_hits"] == 6 and warm.stats["cache_hits"] == 0 and refused.stats["cache_hits"] == 0
    assert sent(sim) == 12
    rule.cache = False
    rule.save()
    sim.reset()
    off = run(make_batch(team, items(6, target={"route": "cr"}, temperature=0)))
    assert off.stats["cache_hits"] == 0 and sent(sim) == 6  # a route without cache makes its calls


def test_identical_items_of_one_batch_are_sent_once(sim, cp, make_route, team, redis_sync):
    make_route("cd", cp, cache=True)
    batch = run(make_batch(team, items(40, distinct=4, target={"route": "cd"}, temperature=0)))
    assert sent(sim) == 4
    got = results(batch)
    assert len(got) == 40 and all(r["ok"] for r in got.values())
    assert sum(r["served_by"] == "cache" for r in got.values()) == 36
    assert sum(r["attempts"] for r in got.values()) == 4
    for i in range(40):  # every copy answers with its question's answer
        assert got[f"c{i}"]["response"] == got[f"c{i % 4}"]["response"]
    assert batch.stats["cache_hits"] == 36
    assert InFlight.objects.count() == 0  # every lead was given up
    assert_exactly_once([batch.id], [sim])


def test_sampling_items_are_never_deduplicated(sim, cp, make_route, team, redis_sync):
    make_route("cs", cp, cache=True)
    batch = run(make_batch(team, items(40, distinct=4, target={"route": "cs"}, temperature=1)))
    assert sent(sim) == 40 and batch.stats["cache_hits"] == 0
    assert CacheEntry.objects.count() == 0
    assert_exactly_once([batch.id], [sim])


def test_followers_of_a_failed_leader_are_sent_themselves(make_provider, team, redis_sync):
    # nothing listens on port 9: every attempt fails (connection refused), so no answer is stored
    make_provider("down", max_retries=0)
    batch = run(make_batch(team, items(5, distinct=1, target={"provider": "down"}), cache=True))
    rows = list(BatchItem.objects.filter(batch=batch))
    assert {r.status for r in rows} == {"failed"}
    assert {r.served_by for r in rows} == {"realtime"} and {r.attempts for r in rows} == {1}
    assert CacheEntry.objects.count() == 0 and InFlight.objects.count() == 0


def test_a_dead_leaders_key_is_taken_over_after_its_lease(sim, cp, team, redis_sync, settings):
    settings.GATEWAY_CLAIM_LEASE_SECONDS = 2.0
    batch = make_batch(team, items(3, distinct=1, target={"provider": "cp"}), cache=True)
    stage_key = None
    from batches.execution.cache_stage import CacheStage
    from batches.execution.engine_wiring import load_routing_table

    row = BatchItem.objects.filter(batch=batch).first()
    stage = CacheStage(load_routing_table(), "probe")
    stage_key = stage.infos([row])[row.id].dedup
    # a leader that died holding the key: its lease ran out
    assert lead([stage_key], "dead-owner", -1.0) == {stage_key}
    run(batch)
    assert sent(sim) == 1 and batch.stats["cache_hits"] == 2
    # a live leader elsewhere is not taken over
    assert lead([stage_key], "other-owner", 60.0) == {stage_key}
    assert lead([stage_key], "third-owner", 60.0) == set()

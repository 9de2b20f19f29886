"""Routing by capacity through the real dispatcher in this process (one dispatcher thread), real
PostgreSQL and Redis, and the simulator: route ``summary`` splits 1:1 between ``fast`` and ``held``;
when ``held`` is held back (a low RPM, a slow answer rate) ``fast`` serves its waiting items; when both
have room the weighted draw decides alone. Assertions are on what the simulator saw, never on time."""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import reverse
from prometheus_client import REGISTRY

from batches import submission
from batches.execution import keepalive
from batches.models import Batch, BatchItem, BatchStatus
from batches.selectors import iter_results
from gateway_engine.routing import preferred_provider
from tests.factories import login_superuser
from tests.scheduling.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

N = 60


def summaries(n: int = N) -> list[dict]:
    return [
        {"custom_id": f"s{i:03d}", "route": "summary", "query": f"summarise {i}", "params": {"max_tokens": 4}}
        for i in range(n)
    ]


def setup(sim_server, make_provider, make_route, *, held_sim: dict, held: dict, fast: dict | None = None):
    sim = sim_server(
        {"seed": 3, "providers": {"fast": {"median_ms": 20}, "held": {"median_ms": 20, **held_sim}}}
    )
    options = {"rpm": 60_000, "burst_seconds": 1, "max_concurrency": 200, "max_retries": 2}
    rows = {
        "fast": make_provider("fast", base_url=sim.provider_url("fast"), **{**options, **(fast or {})}),
        "held": make_provider("held", base_url=sim.provider_url("held"), **{**options, **held}),
    }
    for row in rows.values():
        make_route("summary", row, priority=0, weight=1)
    return sim


def run(team) -> Batch:
    batch = submission.submit_batch(team=team, items=summaries())
    keepalive.ensure_local_dispatcher(background=True)
    try:
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(), 90, "the batch"
        )
    finally:
        wait_for(lambda: not keepalive._local_state["running"], 60, "the dispatcher thread to end")
    return Batch.objects.get(id=batch.id)


def moves(provider: str, peer: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "gateway_capacity_moves_total", {"provider": provider, "from_provider": peer}
        )
        or 0.0
    )


def served_once(sim, results: list[dict]) -> Counter:
    """What the simulator saw: each item once, at the provider its RESULT names. Returns per provider."""
    seen = sim.request_counts()
    by_id = {(p, rid): n for p, ids in seen.items() for rid, n in ids.items()}
    assert all(n == 1 for n in by_id.values()), by_id
    assert sorted(rid for _, rid in by_id) == sorted(r["custom_id"] for r in results)
    assert {(r["provider"], r["custom_id"]) for r in results} == set(by_id)
    return Counter(p for p, _ in by_id)


@pytest.fixture
def moving(settings):
    settings.GATEWAY_CAPACITY_MOVE_WAIT_SECONDS = 0  # a saturated provider's items move at once
    settings.GATEWAY_DISPATCH_LOOKAHEAD_SECONDS = 0.5
    settings.GATEWAY_DISPATCH_SLICE_SECONDS = 60


def check_moved(batch: Batch, sim, drawn_held: int) -> Counter:
    assert batch.status == BatchStatus.COMPLETED and batch.completed_count == N
    results = list(iter_results(batch))
    seen = served_once(sim, results)
    moved = [r for r in results if "routed_by" in r]
    assert moved and all(
        r["routed_by"] == {"rule": "fast", "reason": "capacity", "moved_from": "held"} for r in moved
    )
    assert all(r["provider"] == "fast" for r in moved)  # sent to the claiming peer first
    assert BatchItem.objects.filter(batch=batch, moved_from="held").count() == len(moved)
    # the draw queued about half behind held; most of them were served by fast instead
    assert drawn_held >= N // 3
    assert seen["fast"] >= N - drawn_held + len(moved) and seen["fast"] >= 0.75 * N, seen
    return seen


def drawn(batch_id) -> Counter:
    return Counter(BatchItem.objects.filter(batch_id=batch_id).values_list("moved_from", flat=True))


def held_by_draw(batch: Batch) -> int:
    from batches.execution.engine_wiring import load_routing_table

    table = load_routing_table()
    return sum(
        preferred_provider(table, route="summary", salt=str(batch.id), key=f"s{i:03d}") == "held"
        for i in range(N)
    )


def test_a_peer_with_room_serves_the_items_of_a_provider_whose_quota_is_spent(
    sim_server, make_provider, make_route, team, redis_sync, moving, client
):
    # held: 30 requests a minute at the gateway (its bucket empty after the first), two leases
    sim = setup(sim_server, make_provider, make_route, held_sim={}, held={"rpm": 30, "max_concurrency": 2})
    before = moves("fast", "held")
    batch = run(team)
    seen = check_moved(batch, sim, held_by_draw(batch))
    assert seen["held"] <= 10, seen  # waiting out the draw: ~30 items at 0.5 a second
    moved = BatchItem.objects.filter(batch=batch).exclude(moved_from="").count()
    assert moves("fast", "held") - before == moved
    # the providers page counts them on the provider that took them
    body = login_superuser(client).get(reverse("dashboard:providers")).content.decode()
    assert f"{moved} moved here" in body


def test_a_peer_with_room_serves_the_items_of_a_slow_provider(
    sim_server, make_provider, make_route, team, redis_sync, moving
):
    # held answers in 1.5 s with two leases (1.3 a second, below its RPM's 2 a second): every lease in use
    # while its queue waits. (Its buffer, rate x look-ahead, is not moved: docs/engine.md)
    sim = setup(
        sim_server,
        make_provider,
        make_route,
        held_sim={"median_ms": 1500, "sigma": 0.01},
        held={"rpm": 120, "max_concurrency": 2},
    )
    batch = run(team)
    seen = check_moved(batch, sim, held_by_draw(batch))
    assert seen["held"] <= 10, seen


def exact_draw(batch: Batch, sim) -> None:
    """No item moved: the simulator saw exactly the weighted draw's split."""
    assert batch.status == BatchStatus.COMPLETED
    results = list(iter_results(batch))
    seen = served_once(sim, results)
    assert not any("routed_by" in r for r in results)
    assert drawn(batch.id) == {"": N}
    held = held_by_draw(batch)
    assert seen == {"held": held, "fast": N - held}
    assert N // 3 <= held <= 2 * N // 3  # 1:1 within tolerance


def test_both_with_room_the_weights_decide(sim_server, make_provider, make_route, team, redis_sync, moving):
    sim = setup(sim_server, make_provider, make_route, held_sim={}, held={})
    exact_draw(run(team), sim)


def test_a_peer_behind_by_less_than_the_wait_keeps_its_items(
    sim_server, make_provider, make_route, team, redis_sync, moving, settings
):
    # held is saturated (4 a second) and fast drains first, but no item waits a minute: nothing moves
    settings.GATEWAY_CAPACITY_MOVE_WAIT_SECONDS = 60
    sim = setup(sim_server, make_provider, make_route, held_sim={}, held={"rpm": 240, "max_concurrency": 2})
    exact_draw(run(team), sim)


def test_two_equal_saturated_peers_keep_close_to_the_weights(
    sim_server, make_provider, make_route, team, redis_sync, moving
):
    # both at 10 requests a second: whichever drains first takes only the other's tail
    limits = {"rpm": 600, "max_concurrency": 2}
    sim = setup(sim_server, make_provider, make_route, held_sim={}, held=limits, fast=limits)
    batch = run(team)
    assert batch.status == BatchStatus.COMPLETED
    seen = served_once(sim, list(iter_results(batch)))
    held = held_by_draw(batch)
    assert abs(seen["held"] - held) <= N // 6, (seen, held)
    assert N // 4 <= seen["held"] <= 3 * N // 4, seen


def test_a_paused_provider_s_waiting_items_move_at_once(
    sim_server, make_provider, make_route, team, redis_sync, moving, settings
):
    from providers.limits.factory import run_with_store

    # the wait does not apply to a paused provider: its items move whatever their age
    settings.GATEWAY_CAPACITY_MOVE_WAIT_SECONDS = 3600
    sim = setup(sim_server, make_provider, make_route, held_sim={}, held={"rpm": 600, "max_concurrency": 2})
    run_with_store(lambda store: store.pause_provider("held", "billing", None, "billing limit reached"))
    batch = run(team)
    assert batch.status == BatchStatus.COMPLETED and batch.completed_count == N
    results = list(iter_results(batch))
    assert served_once(sim, results) == {"fast": N}  # nothing reached the paused provider
    moved = [r for r in results if "routed_by" in r]
    assert moved and {r["routed_by"]["moved_from"] for r in moved} == {"held"}

"""The pure scheduling rules, on a fake clock (no database, no Redis)."""

from __future__ import annotations

from collections import Counter

from batches.scheduling import (
    BatchCandidate,
    FairState,
    buffer_target,
    charge,
    effective_lane,
    order_batches,
    pick_team,
    quantum,
)


def serve(
    state: FairState, backlog: dict[str, int], weights: dict[str, int], n: int, q: int = 1
) -> list[str]:
    """Run n picks of q items each while the teams in ``backlog`` have items left; returns who got each."""
    got = []
    for _ in range(n):
        active = {t: weights[t] for t, left in backlog.items() if left > 0}
        pick = pick_team(state, active)
        if pick is None:
            break
        take = min(q, backlog[pick.team])
        backlog[pick.team] -= take
        charge(state, pick.team, take, weights[pick.team])
        got += [pick.team] * take
    return got


def test_equal_weights_share_equally_whatever_the_backlog():
    got = serve(FairState(), {"a": 1500, "b": 150}, {"a": 1, "b": 1}, 200)
    assert Counter(got) == {"a": 100, "b": 100}
    assert got[:4] in (["a", "b", "a", "b"], ["b", "a", "b", "a"])  # interleaved, not in runs


def test_weights_split_the_rate_in_proportion():
    got = serve(FairState(), {"a": 1500, "b": 1500}, {"a": 1, "b": 3}, 400)
    assert Counter(got) == {"a": 100, "b": 300}
    got = serve(FairState(), {"a": 10**6, "b": 10**6, "c": 10**6}, {"a": 1, "b": 2, "c": 5}, 800, q=2)
    assert Counter(got) == {"a": 200, "b": 400, "c": 1000}


def test_a_team_that_was_idle_starts_at_the_current_virtual_time():
    state = FairState()
    weights = {"a": 1, "b": 1}
    serve(state, {"a": 1000}, weights, 500)  # a alone for a long time
    got = serve(state, {"a": 1000, "b": 1000}, weights, 100)
    # b banked no credit while idle: it gets half from now on, not the next 500 picks
    assert Counter(got) == {"a": 50, "b": 50}


def test_quantum_charges_by_items_served():
    got = serve(FairState(), {"a": 1000, "b": 1000}, {"a": 1, "b": 1}, 100, q=4)
    assert Counter(got) == {"a": 200, "b": 200}


def test_lane_then_deadline_then_submission_order():
    now = 1000.0
    low = BatchCandidate("low", "t", "low", created_at=990)
    normal = BatchCandidate("normal", "t", "normal", created_at=991)
    high = BatchCandidate("high", "t", "high", created_at=999)
    urgent = BatchCandidate("urgent", "t", "normal", created_at=995, expires_at=1100)
    later = BatchCandidate("later", "t", "normal", created_at=992, expires_at=1200)
    order = order_batches([low, normal, high, urgent, later], now, aging_seconds=0)
    assert [c.batch_id for c in order] == ["high", "urgent", "later", "normal", "low"]


def test_aging_promotes_a_waiting_low_batch_one_lane_per_period():
    assert effective_lane("low", 0, 60) == 2
    assert effective_lane("low", 59.9, 60) == 2
    assert effective_lane("low", 60, 60) == 1
    assert effective_lane("low", 125, 60) == 0
    assert effective_lane("low", 10**6, 60) == 0
    assert effective_lane("high", 10**6, 60) == 0
    assert effective_lane("low", 10**6, 0) == 2  # aging off
    low = BatchCandidate("low", "t", "low", created_at=0)
    high = BatchCandidate("high", "t", "high", created_at=100)
    assert [c.batch_id for c in order_batches([low, high], 100, 60)] == ["high", "low"]
    # after two aging periods the low batch is in the high lane and was submitted first
    assert [c.batch_id for c in order_batches([low, high], 121, 60)] == ["low", "high"]


def test_sizing_follows_the_provider():
    assert quantum(10) == 1 and quantum(1200 / 60) == 2 and quantum(100) == 10 and quantum(1e9) == 16
    assert buffer_target(10, 4, 2.0) == 20
    assert buffer_target(1, 6, 2.0) == 6  # at least its concurrency
    assert buffer_target(1e9, 4, 2.0) == 500
    assert buffer_target(10, 4, 2.0, dispatchers=4) == 5  # each of 4 dispatchers holds a quarter
    assert buffer_target(1, 6, 2.0, dispatchers=4) == 2

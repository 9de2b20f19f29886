"""A batch's place and ETA (batches.scheduling.place), pure: rows by hand, no database."""

from __future__ import annotations

import datetime as dt

import pytest

from batches.scheduling import LANE_RANK, FairState, charge, order_batches
from batches.scheduling.fair import BatchCandidate
from batches.scheduling.place import (
    BatchPlace,
    QueuedBatch,
    batch_places,
    eta_seconds,
    lane_before_aging,
    place_in_queue,
    served_before,
    served_meanwhile,
)

T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


def row(batch: str, team: str, priority: str, age_s: int, pending: int, queue: str = "alpha") -> QueuedBatch:
    return QueuedBatch(queue, batch, team, priority, T0 - dt.timedelta(seconds=age_s), pending)


# the scene of tests/limits/test_visibility.py, without the database
SCENE = [
    row("a-old", "acme", "normal", 100, 10),
    row("a-high", "acme", "high", 1, 5),
    row("target", "acme", "normal", 50, 20),
    row("a-newer", "acme", "normal", 10, 7),
    row("a-low", "acme", "low", 500, 9),
    row("g", "globex", "normal", 5, 1000),
    row("i-low", "initech", "low", 5, 4),
    row("i-beta", "initech", "normal", 0, 6, queue="beta"),
]
WEIGHTS = {"acme": 1, "globex": 2, "initech": 1}
RPMS = {"alpha": 120, "beta": 60}


def test_place_follows_lanes_age_and_weights():
    (place,) = batch_places("target", SCENE, WEIGHTS, RPMS)
    assert (place.provider, place.pending, place.ahead_same_team) == ("alpha", 20, 10 + 5)
    assert place.ahead_other_teams == 2 * (15 + 20) + 4  # globex weight 2; initech min(4, 35)
    assert place.ahead == 15 + 74
    assert place.rpm == 120 and place.eta_seconds == pytest.approx((15 + 74 + 20) / 2.0)
    # the low-lane batch waits for every normal and high item of its team, whatever its age
    (low,) = batch_places("a-low", SCENE, WEIGHTS, RPMS)
    assert low.ahead_same_team == 10 + 5 + 20 + 7


def test_no_pending_items_no_place_and_one_row_per_queue_sorted():
    assert batch_places("unknown", SCENE, WEIGHTS, RPMS) == []
    rows = [row("b", "acme", "normal", 0, 3, queue="zeta"), row("b", "acme", "normal", 0, 2, queue="beta")]
    places = batch_places("b", rows, {}, {"beta": 60})
    assert [(p.provider, p.pending, p.rpm) for p in places] == [("beta", 2, 60), ("zeta", 3, None)]
    assert places[1].eta_seconds is None  # no configured rate, no ETA


def test_same_team_order_is_the_fair_order_before_aging():
    """served_before agrees with fair.order_batches (no aging, no deadlines) on every pair of lanes."""
    for mine_priority in LANE_RANK:
        for other_priority in LANE_RANK:
            for other_age in (10, 100):  # mine is 50 s old
                mine, other = row("m", "t", mine_priority, 50, 1), row("o", "t", other_priority, other_age, 1)
                cands = [
                    BatchCandidate(c.batch_id, c.team_id, c.priority, c.created_at.timestamp())
                    for c in (mine, other)
                ]
                first = order_batches(cands, now=T0.timestamp(), aging_seconds=0)[0].batch_id
                assert served_before(other, mine) == (first == "o"), (
                    mine_priority,
                    other_priority,
                    other_age,
                )


def test_lane_before_aging_uses_the_one_rank():
    assert [lane_before_aging(p) for p in ("high", "normal", "low")] == [0, 1, 2]
    assert lane_before_aging("unknown") == LANE_RANK["normal"]


def test_other_teams_get_the_sfq_share_of_the_same_virtual_time():
    """served_meanwhile = what fair.charge's virtual time gives the other team while we are served."""
    state = FairState()
    finish = charge(state, "us", 35, 1)
    assert served_meanwhile(35, 1, 2, 1000) == int(finish * 2) == 70
    assert served_meanwhile(35, 1, 1, 4) == 4  # at most what they have pending
    assert served_meanwhile(10, 3, 1, 100) == 3  # int(10 × 1 / 3)
    assert served_meanwhile(10, 0, 0, 100) == 10  # weights below 1 count as 1


def test_eta_and_place_in_other_queues_ignored():
    assert eta_seconds(30, 60) == pytest.approx(30.0)
    assert eta_seconds(30, None) is None and eta_seconds(30, 0) is None
    mine = row("m", "t", "normal", 0, 6, queue="beta")
    place = place_in_queue(mine, [*SCENE, mine], {}, 60)
    assert place == BatchPlace("beta", 6, 0, 6, 60, pytest.approx(12.0))  # initech's 6 on beta, weight 1

"""The benchmark's measuring helpers (bench/common.py): they decide what the tables say."""

import random

import pytest

from bench.common import bench_sim_config, peak_burst, quota_floor, seed_items, user_latencies_from_trace


def test_peak_burst_matches_brute_force():
    rng = random.Random(5)
    for _ in range(50):
        arrivals = sorted(rng.uniform(0, 3) for _ in range(rng.randint(1, 40)))
        rate = rng.uniform(0.5, 20)
        brute = max(
            (i - j + 1) - rate * (arrivals[i] - arrivals[j])
            for i in range(len(arrivals))
            for j in range(i + 1)
        )
        assert peak_burst(arrivals, rate) == pytest.approx(brute)


def test_seed_items_shape():
    items = seed_items(4)
    assert [it["custom_id"] for it in items[:3]] == ["u1-intent", "u1-sentiment", "u1-summary"]
    assert len(items) == 12 and all("[u" in it["query"] for it in items)
    assert {it["route"] for it in items} == {"intent", "sentiment", "summary"}


def test_quota_floor_picks_the_binding_provider():
    cfg = bench_sim_config(20)
    floor = quota_floor(cfg, seed_items(300))
    beta = floor["providers"]["beta"]
    # 300 calls, bucket 30/60*26 = 13, rate 30*20/60 = 10/s -> 28.7 s + one median latency (1.8 s / 20)
    assert beta["binding"] == "rpm"
    assert beta["floor_s"] == pytest.approx((300 - 13) / 10 + 0.09)
    assert floor["t_min"] == pytest.approx(beta["floor_s"])


def test_user_latencies_need_all_three_answers():
    trace = [
        {"provider": "alpha", "tag": "u1", "status": 429, "arrival_s": 1.0, "done_s": 1.0},
        {"provider": "alpha", "tag": "u1", "status": 200, "arrival_s": 2.0, "done_s": 2.5},
        {"provider": "beta", "tag": "u1", "status": 200, "arrival_s": 1.5, "done_s": 3.0},
        {"provider": "local", "tag": "u1", "status": 200, "arrival_s": 1.2, "done_s": 1.4},
        {"provider": "alpha", "tag": "u2", "status": 200, "arrival_s": 1.0, "done_s": 1.1},
        {"provider": "beta", "tag": "u2", "status": 500, "arrival_s": 1.0, "done_s": 1.1},
    ]
    lat = user_latencies_from_trace(trace)
    assert lat["users_complete"] == 1
    assert lat["service_p50"] == pytest.approx(2.0)  # first attempt 1.0 -> last answer 3.0
    assert lat["done_p50"] == pytest.approx(3.0)

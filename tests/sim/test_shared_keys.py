"""Shared keys in the simulator (sim/shared_keys.py, sim/outside.py): one limit spent by several providers
and by an outside client the simulator drives; the remaining-quota headers show what is left of the key."""

from __future__ import annotations

import pytest

from sim.config import ConfigError, load_config
from tests.sim.helpers import HTTP
from tests.waiting import wait_until


def post(sim, name):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    return HTTP.post(sim.provider_url(name) + "/chat/completions", json=body)


def test_two_providers_and_an_outside_client_share_one_key(sim_server):
    sim = sim_server({
        "time_scale": 10,
        "shared_keys": {"k": {"rpm": 600, "tpm": 1_000_000, "burst_seconds": 1,
                              "outside": {"rps": 2, "duration_s": 3, "tokens": 10}}},
        "providers": {"a": {"shared_key": "k", "median_ms": 0}, "b": {"shared_key": "k", "median_ms": 0}},
    })  # fmt: skip
    # the outside client: 2 per simulated second for 3 simulated seconds = 6 requests, 0.3 real seconds
    wait_until(
        lambda: sim.counters()["shared_keys"]["k"]["outside_sent"] == 6, timeout=10, what="outside done"
    )
    first = post(sim, "a")
    assert first.status_code == 200
    # the key's bucket holds 10 requests (600/min x 1 s); the outside client's 6 refilled at 100/s since,
    # so what "a" sees is what is left of the whole key: below 10 after its own request
    assert int(first.headers["x-ratelimit-remaining-requests"]) <= 9
    codes = [post(sim, name).status_code for name in ("a", "b") * 10]
    assert 429 in codes  # a and b draw on one bucket of 10
    counts = sim.counters()
    shared = counts["shared_keys"]["k"]
    assert shared["outside_ok"] == 6 and shared["outside_429"] == 0
    assert counts["providers"]["a"]["rate_limited_429"] + counts["providers"]["b"]["rate_limited_429"] >= 1


def test_outside_spending_lowers_the_remaining_header(sim_server):
    sim = sim_server({
        "time_scale": 1,
        "shared_keys": {"k": {"rpm": 60, "tpm": 6000, "burst_seconds": 60,
                              "outside": {"rps": 20, "duration_s": 1, "tokens": 100}}},
        "providers": {"a": {"shared_key": "k", "median_ms": 0}},
    })  # fmt: skip
    wait_until(
        lambda: sim.counters()["shared_keys"]["k"]["outside_sent"] == 20, timeout=10, what="outside done"
    )
    answer = post(sim, "a")
    # 60 requests in the key; 20 went to the outside client, 1 to "a" (refill: 1/s over ~1 s)
    assert int(answer.headers["x-ratelimit-remaining-requests"]) <= 41
    assert int(answer.headers["x-ratelimit-remaining-tokens"]) <= 6000 - 2000 + 200  # refill: 100/s


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"shared_keys": {"k": {"rpm": 60}}, "providers": {"a": {"shared_key": "nope"}}}, "shared_key"),
        ({"shared_keys": {"k": {"rpm": 60}}, "providers": {"a": {"shared_key": "k", "rpm": 5}}}, "rpm"),
        ({"shared_keys": {"k": {}}, "providers": {"a": {}}}, "shared_keys.k"),
        ({"shared_keys": {"k": {"rpm": 60, "outside": {"rps": 0}}}, "providers": {"a": {}}}, "outside.rps"),
        ({"shared_keys": {"k": {"rpm": 60, "outside": {"rate": 1}}}, "providers": {"a": {}}}, "outside"),
    ],
)
def test_shared_key_config_errors_name_the_field(raw, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(raw)

"""Pure units of the simulator: buckets, sliding windows, token estimates, config validation."""

import math
import random
import statistics

import pytest

from sim.buckets import Bucket
from sim.config import ConfigError, load_config
from sim.counters import SlidingMax
from sim.server import SimProvider, fmt_duration
from sim.testing import KIND_TAILS
from sim.tokens import estimate_prompt_tokens


def test_bucket_starts_full_and_refills_continuously():
    b = Bucket(rate=2.0, capacity=4.0, now=0.0)
    for _ in range(4):
        assert b.wait_for(1, 0.0) == 0.0
        b.take(1, 0.0)
    assert b.wait_for(1, 0.0) == pytest.approx(0.5)
    assert b.wait_for(1, 0.25) == pytest.approx(0.25)  # half a token refilled
    assert b.wait_for(1, 0.5) == 0.0
    assert b.wait_for(3, 100.0) == 0.0 and b.level == pytest.approx(4.0)  # capped at capacity
    assert b.wait_for(5, 100.0) == math.inf  # larger than the capacity: never


def test_sliding_max_is_exact_over_any_window():
    w = SlidingMax(window=1.0)
    times = [0.0, 0.1, 0.5, 0.95, 1.2, 1.3, 1.4, 2.6]
    for t in times:
        w.add(t)
    # brute force: max events in any half-open window (t-1, t]
    brute = max(sum(1 for u in times if t - 1.0 < u <= t) for t in times)
    assert w.maximum == brute == 5


def test_prompt_token_estimate_is_chars_over_four():
    assert estimate_prompt_tokens([{"role": "user", "content": "x" * 40}]) == 10
    assert estimate_prompt_tokens([{"role": "user", "content": "x" * 41}]) == 11
    assert (
        estimate_prompt_tokens([{"role": "system", "content": "ab"}, {"role": "user", "content": "cd"}]) == 1
    )
    assert estimate_prompt_tokens([{"role": "user", "content": [{"type": "text", "text": "y" * 8}]}]) == 2


def test_lognormal_latency_median_and_time_scale():
    cfg = load_config({"providers": {"a": {"median_ms": 200, "sigma": 0.5, "seed": 7}}}).providers["a"]
    p = SimProvider(cfg, time_scale=1.0, seed=None, now=0.0)
    samples = [p.latency_s() for _ in range(4000)]
    assert statistics.median(samples) == pytest.approx(0.2, rel=0.06)
    # spread: log-stdev ~ sigma
    logs = [math.log(s) for s in samples]
    assert statistics.pstdev(logs) == pytest.approx(0.5, rel=0.08)
    fast = SimProvider(cfg, time_scale=10.0, seed=None, now=0.0)
    assert statistics.median(fast.latency_s() for _ in range(2000)) == pytest.approx(0.02, rel=0.08)


def test_completion_tokens_distribution_is_capped_by_max_tokens():
    cfg = load_config(
        {"providers": {"a": {"completion_tokens": {"median": 50, "sigma": 0.3}, "seed": 1}}}
    ).providers["a"]
    p = SimProvider(cfg, 1.0, None, 0.0)
    values = [p.completion_tokens(60) for _ in range(2000)]
    assert max(values) == 60 and min(values) >= 1
    assert 45 <= statistics.median(values) <= 55
    plain = SimProvider(load_config({"providers": {"a": {}}}).providers["a"], 1.0, None, 0.0)
    assert plain.completion_tokens(17) == 17


def test_outage_window_phase():
    cfg = load_config({"providers": {"a": {"outage": {"period_s": 10, "duration_s": 2}}}}).providers["a"]
    p = SimProvider(cfg, time_scale=1.0, seed=None, now=100.0)
    assert [p.in_outage(100.0 + t) for t in (0, 1.9, 2.1, 9.9, 10.0, 11.5, 12.5)] == [
        True, True, False, False, True, True, False,
    ]  # fmt: skip
    scaled = SimProvider(cfg, time_scale=10.0, seed=None, now=0.0)
    assert scaled.in_outage(0.19) and not scaled.in_outage(0.21) and scaled.in_outage(1.05)


def test_fmt_duration():
    assert fmt_duration(0.25) == "250ms"
    assert fmt_duration(1.5) == "1.5s"
    assert fmt_duration(12.0) == "12s"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"providers": {"a": {"rpm": "fast"}}}, "providers.a.rpm"),
        ({"providers": {"a": {"error_rate_500": 2}}}, "providers.a.error_rate_500"),
        ({"providers": {"a": {"fixed_status": 99}}}, "providers.a.fixed_status"),
        ({"providers": {"a": {"outage": {"period_s": 1, "duration_s": 2}}}}, "providers.a.outage.duration_s"),
        ({"providers": {"a": {"colour": 1}}}, "providers.a: unknown keys"),
        ({"providers": {}}, "providers"),
        ({"providers": {"a": {}}, "time_scale": 0}, "config.time_scale"),
        ({"providers": [{"name": "a"}, {"name": "a"}]}, "duplicate"),
    ],
)
def test_config_errors_name_the_field(raw, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(raw)


def test_examples_sim_json_is_valid_and_matches_gateway_providers():
    """examples/providers.json is served by one of the bundled simulator configs (examples/sim.json: the
    seed's three OpenAI providers; examples/sim-kinds.json: one of each kind): same kind, model, route and
    deployment on both sides, and the gateway's limits within the simulator's."""
    import json
    from pathlib import Path
    from urllib.parse import urlparse

    root = Path(__file__).resolve().parents[2]
    gateway = json.loads((root / "examples" / "providers.json").read_text())
    names = {p["name"] for p in gateway["providers"]}
    configs = [load_config(str(root / "examples" / f)) for f in ("sim.json", "sim-kinds.json")]
    served = [c for c in configs if names <= set(c.providers)]
    assert served, f"no examples/sim*.json serves {sorted(names)}"
    sim_cfg = served[0]
    tails = KIND_TAILS
    for p in gateway["providers"]:
        s = sim_cfg.providers[p["name"]]
        kind = p.get("kind", "openai")
        assert kind == s.kind and p["model"] == s.model, p["name"]
        assert urlparse(p["base_url"]).path == f"/{p['name']}{tails[kind]}", p["name"]
        if kind == "azure_openai":
            assert p.get("deployment", p["model"]) == s.native.deployment
            assert p["api_version"] in s.native.api_versions
        real_rpm = s.rpm * sim_cfg.time_scale
        # the gateway may undercut the simulator, never exceed it
        assert 0.9 * real_rpm <= p["rpm"] <= real_rpm, p["name"]
        if s.tpm:
            assert p["tpm"] <= s.tpm * sim_cfg.time_scale, p["name"]
        for key in ("itpm", "otpm"):
            limit = getattr(s.native, key)
            if limit:
                assert p[key] <= limit * sim_cfg.time_scale, (p["name"], key)
                assert p[key] / 60 * p["burst_seconds"] <= limit / 60 * s.burst_seconds, (p["name"], key)
        assert p["max_concurrency"] <= s.max_concurrency, p["name"]
        # the gateway's burst capacity must not exceed the simulator's
        assert p["rpm"] / 60 * p["burst_seconds"] <= s.rpm / 60 * s.burst_seconds + 1e-9, p["name"]


def test_rng_is_reproducible_with_a_seed():
    cfg = load_config({"providers": {"a": {"median_ms": 100, "sigma": 1, "seed": 3}}}).providers["a"]
    a = [SimProvider(cfg, 1.0, None, 0.0).latency_s() for _ in range(1)]
    b = [SimProvider(cfg, 1.0, None, 0.0).latency_s() for _ in range(1)]
    assert a == b
    assert random.Random(3).gauss(0, 1) != 0  # sanity: the RNG is live


def test_run_simulator_command_serves_and_stops(capsys):
    from django.core.management import call_command

    call_command("run_simulator", "--config", "examples/sim.json", "--port", "0", "--duration", "0.3")
    assert "sim listening on http://127.0.0.1:" in capsys.readouterr().out


def test_run_simulator_command_refuses_a_bad_config(tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    bad = tmp_path / "sim.json"
    bad.write_text('{"providers": {"a": {"rpm": -5}}}')
    with pytest.raises(CommandError, match="providers.a.rpm"):
        call_command("run_simulator", "--config", str(bad), "--port", "0", "--duration", "0.1")

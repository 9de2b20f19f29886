"""The simulator over real HTTP: quotas, billing, counting, concurrency, outages, hangs, forcing."""

import asyncio
import math
import time

import httpx
import pytest

from tests.sim.helpers import achat, chat
from tests.waiting import wait_until


def test_rpm_burst_over_capacity_gets_429_with_correct_retry_after(sim_server):
    # 6 rpm = 0.1 req/s, bucket of 10 s -> capacity 1: the second request must wait ~10 s.
    sim = sim_server({"providers": {"a": {"rpm": 6, "burst_seconds": 10, "median_ms": 0}}})
    assert chat(sim, "a").status_code == 200
    r = chat(sim, "a")
    assert r.status_code == 429
    assert r.headers["Retry-After"] == "10"  # ceil(~9.99)
    assert 9_000 < int(r.headers["retry-after-ms"]) <= 10_000
    assert r.headers["x-ratelimit-limit-requests"] == "6"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    c = sim.provider_counters("a")
    assert (c["requests"], c["ok"], c["rate_limited_429"], c["accepted"]) == (2, 1, 1, 1)


def test_burst_capacity_then_refill_at_rate(sim_server):
    # 60 rpm = 1/s, 5 s bucket -> capacity 5
    sim = sim_server({"providers": {"a": {"rpm": 60, "burst_seconds": 5, "median_ms": 0}}})
    with httpx.Client() as client:
        statuses = [chat(sim, "a", client=client).status_code for _ in range(8)]
        assert statuses[:5] == [200] * 5
        assert statuses[5:].count(429) >= 2  # at most one token refilled while the 8 calls ran
        r = chat(sim, "a", client=client)
        wait_ms = int(r.headers.get("retry-after-ms", "0")) if r.status_code == 429 else 0
        assert wait_ms <= 1000  # one token takes 1 s at 1/s
        time.sleep(wait_ms / 1000 + 0.01)
        assert chat(sim, "a", client=client).status_code == 200  # honouring retry-after-ms works


def test_time_scale_compresses_rates(sim_server):
    # 6 simulated rpm at 10x = 1 real req/s; a 1 simulated-second bucket holds (at least) 1 request.
    sim = sim_server({"time_scale": 10, "providers": {"a": {"rpm": 6, "burst_seconds": 1, "median_ms": 0}}})
    assert chat(sim, "a").status_code == 200
    r = chat(sim, "a")
    assert r.status_code == 429
    assert r.headers["x-ratelimit-limit-requests"] == "60"
    assert 500 < int(r.headers["retry-after-ms"]) <= 1000
    assert sim.counters()["minute_s"] == pytest.approx(6.0)


def test_tpm_charges_prompt_plus_max_tokens(sim_server):
    # 600 tpm = 10 tokens/s, 10 s bucket -> 100 tokens. Each call: 40 chars = 10 prompt + 40 max = 50.
    sim = sim_server({"providers": {"a": {"tpm": 600, "burst_seconds": 10, "median_ms": 0}}})
    content = "x" * 40
    assert chat(sim, "a", content, max_tokens=40).status_code == 200
    assert chat(sim, "a", content, max_tokens=40).status_code == 200
    r = chat(sim, "a", content, max_tokens=40)
    assert r.status_code == 429 and r.json()["error"]["type"] == "tokens"
    assert r.headers["Retry-After"] == "5"  # 50 tokens at 10/s
    assert r.headers["x-ratelimit-limit-tokens"] == "600"
    again = chat(sim, "a", content, max_tokens=40)  # a refused call was not charged: still ~5 s away
    assert again.status_code == 429 and 4 <= int(again.headers["Retry-After"]) <= 5
    too_big = chat(sim, "a", "x" * 400, max_tokens=10)  # 110 > capacity 100: can never pass
    assert too_big.status_code == 400 and too_big.json()["error"]["code"] == "request_too_large"
    c = sim.provider_counters("a")
    assert c["max_charged_tokens_per_minute"] >= 100
    assert c["billed_prompt_tokens"] == 10 * 2  # refused calls are not billed


def test_billing_500_after_processing_is_billed_429_is_not(sim_server):
    sim = sim_server(
        {
            "providers": {
                "bad": {"error_rate_500": 1.0, "median_ms": 5},
                "tight": {"rpm": 6, "burst_seconds": 10, "median_ms": 0},
            }
        }
    )
    r = chat(sim, "bad", "y" * 20, max_tokens=7)
    assert r.status_code == 500
    ok = chat(sim, "tight", "z" * 8, max_tokens=3)
    limited = chat(sim, "tight", "z" * 8, max_tokens=3)
    assert (ok.status_code, limited.status_code) == (200, 429)
    assert ok.json()["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    counters = sim.counters()["providers"]
    bad, tight = counters["bad"], counters["tight"]
    assert (bad["billed_prompt_tokens"], bad["billed_completion_tokens"]) == (5, 7)
    assert bad["delivered_tokens"] == 0 and bad["errors_500"] == 1 and bad["status_5xx"] == 1
    assert tight["billed_tokens"] == tight["delivered_tokens"] == 5  # the 429 added nothing
    assert sim.counters()["totals"]["billed_tokens"] == 17


def test_counts_are_honest_under_concurrent_load(sim_server):
    sim = sim_server(
        {"providers": {"a": {"rpm": 1200, "burst_seconds": 1, "median_ms": 20, "max_concurrency": 8}}}
    )

    async def fire():
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=200)) as client:
            return await asyncio.gather(*(achat(client, sim, "a", max_tokens=4) for _ in range(120)))

    responses = asyncio.run(fire())
    statuses = [r.status_code for r in responses]
    c = sim.provider_counters("a")
    assert c["requests"] == 120
    assert c["ok"] == statuses.count(200) and c["rate_limited_429"] == statuses.count(429)
    assert c["overload_503"] == statuses.count(503)
    assert sum(c["by_status"].values()) == 120
    assert c["accepted"] == c["ok"]
    assert c["delivered_tokens"] == sum(
        r.json()["usage"]["total_tokens"] for r in responses if r.status_code == 200
    )
    assert c["billed_tokens"] == c["delivered_tokens"]
    assert c["max_in_flight"] <= 8
    # a correct limiter admits at most capacity + rate x window in any window
    assert c["max_accepted_per_minute"] <= 20 + 1200
    assert c["in_flight"] == 0


def test_concurrency_ceiling_answers_503_and_is_not_billed(sim_server):
    sim = sim_server({"providers": {"local": {"median_ms": 400, "max_concurrency": 2}}})

    async def fire():
        async with httpx.AsyncClient() as client:
            return await asyncio.gather(*(achat(client, sim, "local") for _ in range(5)))

    statuses = sorted(r.status_code for r in asyncio.run(fire()))
    assert statuses == [200, 200, 503, 503, 503]
    c = sim.provider_counters("local")
    assert c["max_in_flight"] == 2 and c["overload_503"] == 3 and c["accepted"] == 2
    assert c["billed_tokens"] == c["delivered_tokens"] > 0


def test_outage_window_returns_503_then_recovers(sim_server):
    sim = sim_server({"providers": {"a": {"median_ms": 0, "outage": {"period_s": 4, "duration_s": 1.5}}}})
    sim.reset()  # outage clock starts now: [0, 1.5) down, [1.5, 4) up
    r = chat(sim, "a")
    assert r.status_code == 503 and r.json()["error"]["code"] == "outage"
    answers = [r.status_code]  # the window's phases exactly: test_sim_units.py::test_outage_window_phase

    def recovered() -> bool:
        answers.append(chat(sim, "a").status_code)
        return answers[-1] == 200

    wait_until(recovered, 30, what="the provider to recover")
    assert set(answers) == {503, 200}
    c = sim.provider_counters("a")
    assert c["outage_503"] == answers.count(503) and c["ok"] == 1
    assert c["billed_tokens"] == c["delivered_tokens"]


def test_hang_outlasts_client_timeout_and_is_billed_not_delivered(sim_server):
    sim = sim_server({"providers": {"a": {"hang_rate": 1.0, "hang_seconds": 30}}})
    with pytest.raises(httpx.ReadTimeout):
        chat(sim, "a", "q" * 8, max_tokens=5, timeout=0.5)

    def disconnected() -> dict | None:
        c = sim.provider_counters("a")
        return c if c["disconnects"] else None

    c = wait_until(disconnected, 30, what="the simulator to see the client go")
    assert c["hangs"] == 1 and c["disconnects"] == 1 and c["in_flight"] == 0
    assert c["billed_tokens"] == 7 and c["delivered_tokens"] == 0


def test_forced_status_header_script_and_fixed_status(sim_server):
    sim = sim_server(
        {
            "providers": {
                "a": {"median_ms": 0, "status_script": [503, 429, 200]},
                "down": {"fixed_status": 503},
                "free": {"median_ms": 0},
            }
        }
    )
    assert [chat(sim, "a").status_code for _ in range(4)] == [503, 429, 200, 200]
    assert chat(sim, "down").status_code == 503
    r = chat(sim, "free", headers={"x-sim-force-status": "429", "x-sim-retry-after": "7"})
    assert r.status_code == 429 and r.headers["Retry-After"] == "7"
    assert chat(sim, "free", headers={"x-sim-force-status": "422"}).status_code == 422
    counters = sim.counters()["providers"]
    assert counters["a"]["forced"] == 2 and counters["free"]["forced"] == 2
    assert counters["free"]["billed_tokens"] == 0 and counters["down"]["billed_tokens"] == 0


def test_bad_requests_auth_and_unknown_provider(sim_server):
    sim = sim_server({"providers": {"a": {"api_key": "sekret", "median_ms": 0}}})
    url = sim.provider_url("a") + "/chat/completions"
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(url, json=body).status_code == 401
    auth = {"Authorization": "Bearer sekret"}
    assert httpx.post(url, json=body, headers=auth).status_code == 200
    assert httpx.post(url, content=b"{not json", headers=auth).status_code == 400
    assert httpx.post(url, json={"messages": []}, headers=auth).status_code == 400
    assert httpx.post(url, json={**body, "max_tokens": 0}, headers=auth).status_code == 400
    assert httpx.post(sim.provider_url("nope") + "/chat/completions", json=body).status_code == 404
    c = sim.provider_counters("a")
    assert c["status_4xx"] == 4 and c["ok"] == 1


def test_default_max_tokens_and_response_shape(sim_server):
    sim = sim_server({"providers": {"a": {"median_ms": 0, "default_max_tokens": 9, "model": "a-7b"}}})
    data = httpx.post(
        sim.provider_url("a") + "/chat/completions", json={"messages": [{"role": "user", "content": "abcd"}]}
    ).json()
    assert data["object"] == "chat.completion" and data["model"] == "a-7b"
    assert data["usage"] == {"prompt_tokens": 1, "completion_tokens": 9, "total_tokens": 10}
    assert data["choices"][0]["message"]["role"] == "assistant"
    assert data["choices"][0]["finish_reason"] == "length"


def test_sliding_window_counts_accepted_per_simulated_minute(sim_server):
    # time_scale 60: a simulated minute is 1 real second.
    sim = sim_server({"time_scale": 60, "providers": {"a": {"median_ms": 0}}})
    for _ in range(3):
        chat(sim, "a")
    time.sleep(1.1)
    for _ in range(2):
        chat(sim, "a")
    c = sim.provider_counters("a")
    assert c["accepted"] == 5 and c["max_accepted_per_minute"] == 3


def test_reset_and_set_config(sim_server):
    sim = sim_server({"providers": {"a": {"rpm": 6, "burst_seconds": 10, "median_ms": 0}}})
    chat(sim, "a")
    assert chat(sim, "a").status_code == 429
    sim.reset()
    assert sim.provider_counters("a")["requests"] == 0
    assert chat(sim, "a").status_code == 200  # bucket refilled
    sim.set_config({"providers": {"b": {"median_ms": 0}}})
    assert chat(sim, "b").status_code == 200
    assert "a" not in sim.counters()["providers"]
    with pytest.raises(ValueError, match="rpm"):
        sim.set_config({"providers": {"b": {"rpm": -1}}})


def test_openai_sdk_reads_answers_and_honours_429(sim_server):
    from openai import OpenAI, RateLimitError

    sim = sim_server({"providers": {"a": {"rpm": 6, "burst_seconds": 10, "median_ms": 0}}})
    client = OpenAI(base_url=sim.provider_url("a"), api_key="x", max_retries=0)
    resp = client.chat.completions.create(
        model="a", messages=[{"role": "user", "content": "hello"}], max_tokens=4
    )
    assert resp.usage.completion_tokens == 4 and resp.usage.prompt_tokens == math.ceil(5 / 4)
    with pytest.raises(RateLimitError):
        client.chat.completions.create(
            model="a", messages=[{"role": "user", "content": "hello"}], max_tokens=4
        )


def test_subprocess_runner_serves_the_example_config():
    from sim.testing import run_simulator_subprocess

    with run_simulator_subprocess("examples/sim.json") as sim:
        health = httpx.get(f"{sim.base_url}/_sim/health").json()
        assert health["providers"] == ["alpha", "beta", "local"] and health["time_scale"] == 10
        assert chat(sim, "local").status_code == 200


def test_trace_records_tagged_requests_relative_to_reset(sim_server):
    sim = sim_server(
        {"trace_tag_regex": r"\[(u\d+)\]", "providers": {"a": {"median_ms": 30}, "b": {"fixed_status": 503}}}
    )
    sim.reset()
    assert chat(sim, "a", "[u7] classify this").status_code == 200
    assert chat(sim, "b", "[u8] and this").status_code == 503
    assert chat(sim, "a", "untagged").status_code == 200
    rows = sim.trace()
    assert [(r["provider"], r["tag"], r["status"]) for r in rows] == [
        ("a", "u7", 200),
        ("b", "u8", 503),
        ("a", None, 200),
    ]
    assert rows[0]["done_s"] - rows[0]["arrival_s"] >= 0.025
    assert 0 <= rows[0]["arrival_s"] < rows[1]["arrival_s"] < rows[2]["arrival_s"]
    sim.reset()
    assert sim.trace() == []


def test_overload_503_still_counts_against_the_rate_limit(sim_server):
    # capacity 2 requests, one at a time: the 503'd request used a token, so a third call gets 429
    sim = sim_server(
        {"providers": {"a": {"rpm": 6, "burst_seconds": 20, "median_ms": 400, "max_concurrency": 1}}}
    )

    async def fire():
        async with httpx.AsyncClient() as client:
            return await asyncio.gather(*(achat(client, sim, "a") for _ in range(2)))

    assert sorted(r.status_code for r in asyncio.run(fire())) == [200, 503]
    assert chat(sim, "a").status_code == 429
    c = sim.provider_counters("a")
    assert (c["admitted"], c["accepted"], c["overload_503"], c["rate_limited_429"]) == (2, 1, 1, 1)
    assert c["max_accepted_per_minute"] == 2


def test_reset_replays_the_same_random_draws_with_a_seed(sim_server):
    sim = sim_server({"seed": 3, "providers": {"a": {"median_ms": 0, "error_rate_500": 0.5}}})

    def statuses():
        return [chat(sim, "a").status_code for _ in range(12)]

    first = statuses()
    assert 200 in first and 500 in first
    sim.reset()
    assert statuses() == first


def test_sustained_overload_never_admits_more_than_rate_plus_burst(sim_server):
    # time_scale 60: a simulated minute is 1 real second; 60 rpm -> 60 req/s, bucket 30 simulated s -> 30.
    sim = sim_server({"time_scale": 60, "providers": {"a": {"rpm": 60, "burst_seconds": 30, "median_ms": 0}}})

    async def hammer():
        deadline = time.monotonic() + 2.5
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=16)) as client:

            async def loop():
                while time.monotonic() < deadline:
                    await achat(client, sim, "a")

            await asyncio.gather(*(loop() for _ in range(16)))

    asyncio.run(hammer())
    c = sim.provider_counters("a")
    assert c["rate_limited_429"] > 0  # demand was above the limit
    assert 60 <= c["max_accepted_per_minute"] <= 60 + 30
    # over the whole run: at most the bucket plus the refill
    assert c["accepted"] <= 30 + 60 * (c["active_seconds"] or 0) + 60 * 0.1

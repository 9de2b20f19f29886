"""Each kind's limits (Anthropic ITPM/OTPM, Azure's short windows, Gemini per-minute and per-day quota), its
named fault forms (scripts, overload windows, spend exhaustion, content triggers), cached-token usage, and
counting per X-Request-ID whatever the answer — through the real HTTP server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sim.config import ConfigError, load_config
from sim.kind_config import KINDS
from sim.limits import Charge, Limits
from tests.sim.helpers import (
    HTTP,
    anthropic_post,
    azure_body,
    azure_post,
    claude_body,
    gemini_body,
    gemini_post,
)

ROOT = Path(__file__).resolve().parents[2]


def rid(value: str) -> dict:
    return {"anthropic-version": "2023-06-01", "X-Request-ID": value}


def openai_post(sim, name, content="hi", headers=None):
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 4}
    return HTTP.post(sim.provider_url(name) + "/chat/completions", json=body, headers=headers or {})


# ---- config ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"kind": "claude"}, "providers.p.kind: 'claude' is not one of"),
        ({"itpm": 100}, "providers.p.itpm: not an option of kind openai"),
        ({"kind": "anthropic", "rpd": 5}, "providers.p.rpd: not an option of kind anthropic"),
        ({"kind": "gemini", "cache_write_ratio": 0.1}, "providers.p.cache_write_ratio: not an option of kind gemini"),
        ({"kind": "gemini", "spend_exhausted_after": 1}, "providers.p.spend_exhausted_after: not an option"),
        ({"kind": "openai", "deployment": "d"}, "providers.p.deployment: not an option of kind openai"),
        ({"kind": "azure_openai", "burst_seconds": 5}, "providers.p.burst_seconds: kind azure_openai"),
        ({"kind": "azure_openai", "window_seconds": 11}, "providers.p.window_seconds: must be <= 10"),
        ({"kind": "azure_openai", "window_seconds": 0.5}, "providers.p.window_seconds: must be >= 1"),
        ({"kind": "azure_openai", "api_version": []}, "providers.p.api_version: expected a non-empty string"),
        ({"kind": "azure_openai", "deployment": ""}, "providers.p.deployment: expected a non-empty string"),
        ({"kind": "anthropic", "itpm": -1}, "providers.p.itpm: must be >= 0"),
        ({"kind": "gemini", "rpd": 1.5}, "providers.p.rpd: expected an integer"),
        ({"kind": "gemini", "day_seconds": 0}, "providers.p.day_seconds: must be >= 0.001"),
        ({"cache_read_ratio": 1.5}, "providers.p.cache_read_ratio: must be <= 1"),
        ({"kind": "anthropic", "cache_read_ratio": 0.6, "cache_write_ratio": 0.6}, "providers.p.cache_write_ratio"),
        ({"kind": "gemini", "error_script": ["spend_402"]}, "providers.p.error_script[0]: 'spend_402' is not a form"),
        ({"error_script": "overloaded"}, "providers.p.error_script: expected a list"),
        ({"error_script": ["ok"], "status_script": [500]}, "providers.p.error_script: give error_script or"),
        ({"kind": "anthropic", "spend_form": "402"}, "providers.p.spend_form: needs spend_exhausted_after"),
        ({"kind": "anthropic", "spend_exhausted_after": 1, "spend_form": "403"}, "providers.p.spend_form: '403'"),
        ({"spend_exhausted_after": 1, "spend_form": "402"}, "providers.p.spend_form: '402' is not a spend form"),
        ({"overload": {"period_s": 1, "duration_s": 2}}, "providers.p.overload.duration_s: must be <= period_s"),
        ({"overload": {"period_s": 1, "duration_s": 1, "every": 2}}, "providers.p.overload: unknown keys"),
    ],
)  # fmt: skip
def test_kind_config_errors_name_the_field(raw, field):
    with pytest.raises(ConfigError) as err:
        load_config({"providers": {"p": raw}})
    assert str(err.value).startswith(field), str(err.value)


def test_kind_defaults_and_the_four_kinds_example():
    cfg = load_config({"providers": {"a": {"kind": "azure_openai", "model": "gpt-4o"}, "o": {}}}).providers
    assert cfg["o"].kind == "openai" and cfg["a"].native.deployment == "gpt-4o"
    assert cfg["a"].burst_seconds == 10 and "2024-10-21" in cfg["a"].native.api_versions
    example = load_config(str(ROOT / "examples" / "sim-kinds.json"))
    assert sorted(p.kind for p in example.providers.values()) == sorted(KINDS)  # one of each kind
    assert json.loads((ROOT / "examples" / "sim-kinds.json").read_text())["time_scale"] == example.time_scale


# ---- limits (units) --------------------------------------------------------------------------------------
def test_itpm_excludes_cache_reads_and_otpm_gives_back_the_unused_reservation():
    cfg = load_config(
        {"providers": {"c": {"kind": "anthropic", "itpm": 600, "otpm": 600, "burst_seconds": 6}}}
    )
    limits = Limits(cfg.providers["c"], time_scale=1.0, now=0.0)  # buckets of 60 input / 60 output tokens
    assert limits.check(Charge(1, 0, 61, 1), 0.0).limit == "input_tokens"
    limits.take(Charge(1, 0, 50, 40), 0.0)  # 100 prompt tokens, 50 of them cache reads: 50 charged
    short = limits.check(Charge(1, 0, 1, 40), 0.0)
    assert short.limit == "output_tokens" and short.wait == pytest.approx(20 / 10)  # 20 short at 10/s
    limits.give_back_output(35, 0.0)  # the answer used 5 of its 40
    assert limits.check(Charge(1, 0, 10, 40), 0.0) is None
    assert limits.state(0.0)["output_tokens"] == (600, 55, pytest.approx(0.5))


def test_per_day_quota_counts_requests_in_the_simulated_day():
    cfg = load_config({"providers": {"g": {"kind": "gemini", "rpd": 2, "day_seconds": 100}}}).providers["g"]
    limits = Limits(cfg, time_scale=1.0, now=0.0)
    for t in (0.0, 50.0):
        assert limits.check(Charge(1, 1, 1, 1), t) is None
        limits.take(Charge(1, 1, 1, 1), t)
    assert limits.check(Charge(1, 1, 1, 1), 60.0).limit == "per_day"
    assert limits.check(Charge(1, 1, 1, 1), 60.0).wait == pytest.approx(40.0)
    assert limits.check(Charge(1, 1, 1, 1), 100.0) is None  # the next day


# ---- limits (server) ---------------------------------------------------------------------------------------
def test_anthropic_itpm_otpm_429_carries_its_headers(sim_server):
    sim = sim_server({"providers": {"c": {"kind": "anthropic", "model": "claude-sim", "itpm": 600, "otpm": 120,
                                          "burst_seconds": 10, "median_ms": 0, "completion_tokens": 2}}})  # fmt: skip
    ok = anthropic_post(sim, "c", claude_body(max_tokens=15))  # OTPM bucket 20: 15 reserved, 13 given back
    assert ok.status_code == 200 and ok.json()["usage"]["output_tokens"] == 2
    assert ok.headers["anthropic-ratelimit-output-tokens-limit"] == "120"
    assert ok.headers["anthropic-ratelimit-output-tokens-remaining"] == "18"
    assert (
        anthropic_post(sim, "c", claude_body(max_tokens=15)).status_code == 200
    )  # passes thanks to the give-back
    limited = anthropic_post(sim, "c", claude_body(max_tokens=20))
    assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limit_error"
    assert "output tokens per minute" in limited.json()["error"]["message"]
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.headers["anthropic-ratelimit-input-tokens-reset"].endswith("Z")
    c = sim.provider_counters("c")
    assert (c["rate_limited_429"], c["max_output_tokens_per_minute"], c["shape_rejections"]) == (1, 4, 0)


def test_gemini_per_minute_and_per_day_quota(sim_server):
    sim = sim_server({"time_scale": 3600, "providers": {
        "day": {"kind": "gemini", "model": "g", "rpd": 2, "day_seconds": 3600, "median_ms": 0}}})  # fmt: skip
    statuses = [gemini_post(sim, "day", "g", gemini_body()).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    day = gemini_post(sim, "day", "g", gemini_body()).json()["error"]
    quota = day["details"][0]["violations"][0]
    assert (
        day["status"] == "RESOURCE_EXHAUSTED"
        and quota["quotaId"] == "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
    )
    assert day["details"][2]["retryDelay"].endswith("s")
    assert sim.provider_counters("day")["per_day_429"] == 2
    time.sleep(1.05)  # the simulated day is one real second
    assert gemini_post(sim, "day", "g", gemini_body()).status_code == 200
    sim = sim_server(
        {"providers": {"minute": {"kind": "gemini", "model": "g", "rpm": 60, "burst_seconds": 1}}}
    )
    assert gemini_post(sim, "minute", "g", gemini_body()).status_code == 200
    minute = gemini_post(sim, "minute", "g", gemini_body())
    assert minute.status_code == 429 and minute.headers.get("retry-after") is None  # Gemini sends no headers
    info = minute.json()["error"]["details"]
    assert info[0]["violations"][0]["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    assert 0 < float(info[2]["retryDelay"].rstrip("s")) <= 1.0  # the real wait for one request (1 / s)


def test_azure_short_windows_and_retry_after_ms(sim_server):
    sim = sim_server({"providers": {"az": {"kind": "azure_openai", "model": "d", "rpm": 60, "window_seconds": 1,
                                           "median_ms": 0}}})  # fmt: skip
    ok = azure_post(sim, "az", "d", azure_body())
    assert ok.status_code == 200 and ok.headers["x-ratelimit-remaining-requests"] == "0"
    limited = azure_post(sim, "az", "d", azure_body())
    assert limited.status_code == 429
    assert 0 < int(limited.headers["retry-after-ms"]) <= 1000 and limited.headers["retry-after"] == "1"
    assert "have exceeded call rate limit" in limited.json()["error"]["message"]


def test_azure_counts_requests_per_window_and_tokens_per_real_minute(sim_server):
    # Azure's headers (docs/sim.md): requests left in the current window, tokens left of the per-minute
    # limit (one real minute, whatever the time_scale), and no reset headers
    sim = sim_server({"time_scale": 10, "providers": {"az": {"kind": "azure_openai", "model": "d", "rpm": 300,
                                                             "tpm": 10_000, "window_seconds": 10, "median_ms": 0}}})  # fmt: skip
    ok = azure_post(sim, "az", "d", azure_body("x" * 40, max_tokens=10))  # 10 prompt + 10 tokens
    assert ok.status_code == 200
    assert ok.headers["x-ratelimit-remaining-requests"] == "49"  # 300/min over a 10-s window: 50
    assert ok.headers["x-ratelimit-limit-tokens"] == "100000"  # real per-minute rates
    assert ok.headers["x-ratelimit-remaining-tokens"] == str(100_000 - 20)  # a real minute of 10,000 x 10
    assert not [h for h in ok.headers if h.startswith("x-ratelimit-reset")]


# ---- faults ------------------------------------------------------------------------------------------------
def test_error_scripts_and_overload_windows_answer_each_kinds_form(sim_server):
    sim = sim_server({"providers": {
        "c": {"kind": "anthropic", "model": "m", "median_ms": 0, "error_script": ["overloaded", "overloaded", "ok", "server_error"]},
        "cw": {"kind": "anthropic", "model": "m", "overload": {"period_s": 3600, "duration_s": 3600}},
        "gw": {"kind": "gemini", "model": "g", "overload": {"period_s": 3600, "duration_s": 3600}},
        "ow": {"overload": {"period_s": 3600, "duration_s": 3600}}}})  # fmt: skip
    assert [anthropic_post(sim, "c", claude_body()).status_code for _ in range(5)] == [
        529,
        529,
        200,
        500,
        200,
    ]
    assert anthropic_post(sim, "cw", claude_body(model="m")).json()["error"]["type"] == "overloaded_error"
    gem = gemini_post(sim, "gw", "g", gemini_body())
    assert gem.status_code == 503 and gem.json()["error"]["status"] == "UNAVAILABLE"
    assert openai_post(sim, "ow").status_code == 503
    c = sim.provider_counters("c")
    assert c["overloaded"] == 2 and c["by_form"] == {"overloaded": 2, "server_error": 1}
    assert c["rate_limited_429"] == 0 and c["by_status"] == {"200": 2, "500": 1, "529": 2}


@pytest.mark.parametrize(
    ("kind", "form", "status", "check"),
    [
        (
            "anthropic",
            "429",
            429,
            lambda e: e["error"]["details"] == {"error_code": "enforced_spend_limit_reached"},
        ),
        (
            "anthropic",
            "400",
            400,
            lambda e: "reached your specified API usage limits" in e["error"]["message"],
        ),
        ("anthropic", "402", 402, lambda e: e["error"]["type"] == "billing_error"),
        ("openai", "insufficient_quota", 429, lambda e: e["error"]["code"] == "insufficient_quota"),
    ],
)
def test_spend_exhaustion_answers_its_form_for_good(sim_server, kind, form, status, check):
    sim = sim_server({"providers": {"p": {"kind": kind, "model": "m", "median_ms": 0, "spend_exhausted_after": 2,
                                          "spend_form": form}}})  # fmt: skip

    def post(i):
        if kind == "anthropic":
            return anthropic_post(sim, "p", claude_body(model="m"), headers=rid(f"s{i}"))
        return openai_post(sim, "p", headers={"X-Request-ID": f"s{i}"})

    replies = [post(i) for i in range(5)]
    assert [r.status_code for r in replies] == [200, 200, status, status, status]
    assert all(check(r.json()) for r in replies[2:])
    c = sim.provider_counters("p")
    assert c["spend_exhausted"] == 3 and c["shape_rejections"] == 0
    assert sim.request_counts()["p"] == {f"s{i}": 1 for i in range(5)}
    sim.reset()  # reset restores the budget
    assert post(9).status_code == 200


def test_content_triggers_fault_one_item_and_other_kinds_triggers_are_text(sim_server):
    sim = sim_server({"providers": {
        "c": {"kind": "anthropic", "model": "m", "median_ms": 0},
        "g": {"kind": "gemini", "model": "g", "median_ms": 0},
        "o": {"median_ms": 0}}})  # fmt: skip
    refusal = anthropic_post(sim, "c", claude_body("[[sim:refusal]] hi", model="m")).json()
    assert refusal["stop_reason"] == "refusal" and refusal["content"] == []
    assert (
        anthropic_post(sim, "c", claude_body("[[sim:blocked]] hi", model="m")).json()["stop_reason"]
        == "max_tokens"
    )
    assert anthropic_post(sim, "c", claude_body("[[sim:fault:spend_402]]", model="m")).status_code == 402
    blocked = gemini_post(sim, "g", "g", gemini_body("[[sim:blocked]]"))
    assert blocked.status_code == 200 and "candidates" not in blocked.json()
    assert blocked.json()["promptFeedback"]["blockReason"] == "SAFETY"
    assert gemini_post(sim, "g", "g", gemini_body("[[sim:fault:per_day]]")).status_code == 429
    assert (
        openai_post(sim, "o", "[[sim:fault:insufficient_quota]]").json()["error"]["type"]
        == "insufficient_quota"
    )
    assert openai_post(sim, "o", "[[sim:input_filter]]").status_code == 200  # an azure trigger: plain text
    several = "[[sim:blocked]] [[sim:input_filter]] [[sim:refusal]]"  # one item, a trigger per fallback kind
    assert anthropic_post(sim, "c", claude_body(several, model="m")).json()["stop_reason"] == "refusal"
    assert "candidates" not in gemini_post(sim, "g", "g", gemini_body(several)).json()
    assert sim.provider_counters("g")["by_form"] == {"blocked": 2, "per_day": 1}


def test_cached_tokens_in_every_kinds_usage(sim_server):
    common = {"median_ms": 0, "cache_read_ratio": 0.5, "completion_tokens": 2}
    sim = sim_server({"providers": {"c": {"kind": "anthropic", "model": "m", "cache_write_ratio": 0.25, **common},
                                    "g": {"kind": "gemini", "model": "g", **common},
                                    "a": {"kind": "azure_openai", "model": "d", **common}, "o": common}})  # fmt: skip
    text = "x" * 40  # 10 prompt tokens
    u = anthropic_post(sim, "c", claude_body(text, model="m")).json()["usage"]
    assert u == {
        "input_tokens": 3,
        "output_tokens": 2,
        "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 5,
    }
    g = gemini_post(sim, "g", "g", gemini_body(text)).json()["usageMetadata"]
    assert (g["promptTokenCount"], g["cachedContentTokenCount"], g["candidatesTokenCount"]) == (10, 5, 2)
    for r in (azure_post(sim, "a", "d", azure_body(text)), openai_post(sim, "o", text)):
        assert r.json()["usage"]["prompt_tokens_details"] == {"cached_tokens": 5}
        assert r.json()["usage"]["prompt_tokens"] == 10  # OpenAI's prompt_tokens include the cached ones
    c = sim.provider_counters("c")
    assert (
        c["max_input_tokens_per_minute"] == 5 and c["billed_prompt_tokens"] == 10
    )  # ITPM measure: no cache reads


def test_every_kind_counts_each_request_id_whatever_the_answer_and_traces_it(sim_server):
    sim = sim_server({"trace_tag_regex": r"\[(t\d+)\]", "providers": {
        "c": {"kind": "anthropic", "model": "m", "median_ms": 0, "rpm": 1, "api_key": "k"},
        "g": {"kind": "gemini", "model": "g", "median_ms": 0, "error_script": ["overloaded"]},
        "a": {"kind": "azure_openai", "model": "d", "median_ms": 0}}})  # fmt: skip
    key = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    assert (
        anthropic_post(
            sim, "c", claude_body("[t1] a", model="m"), headers={**key, "X-Request-ID": "i1"}
        ).status_code
        == 200
    )
    assert (
        anthropic_post(
            sim, "c", claude_body("[t2] a", model="m"), headers={**key, "X-Request-ID": "i1"}
        ).status_code
        == 429
    )
    assert anthropic_post(sim, "c", claude_body(model="m"), headers={"X-Request-ID": "i2"}).status_code == 400
    assert (
        gemini_post(sim, "g", "g", gemini_body("[t3] b"), headers={"X-Request-ID": "i1"}).status_code == 503
    )
    assert gemini_post(sim, "g", "g", {"contents": []}, headers={"X-Request-ID": "i3"}).status_code == 400
    assert azure_post(sim, "a", "d", azure_body("[t4] c"), headers={"X-Request-ID": "i1"}).status_code == 200
    assert azure_post(sim, "a", "x", azure_body(), headers={"X-Request-ID": "i4"}).status_code == 404
    assert sim.request_counts() == {"c": {"i1": 2, "i2": 1}, "g": {"i1": 1, "i3": 1}, "a": {"i1": 1, "i4": 1}}
    rows = [(r["provider"], r["tag"], r["status"]) for r in sim.trace()]
    assert rows == [("c", "t1", 200), ("c", "t2", 429), ("c", None, 400), ("g", "t3", 503), ("g", None, 400),
                    ("a", "t4", 200), ("a", None, 404)]  # fmt: skip
    assert sim.shape_rejections() == {"c": 1, "g": 1, "a": 1}

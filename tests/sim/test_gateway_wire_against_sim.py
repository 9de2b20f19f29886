"""The gateway's own wire modules (gateway_engine.wire, one per kind) against the simulator: every request
shape they build for the item shapes below passes the simulator's validation of that kind (0 shape
rejections), and their ``read_answer`` parses its answers into the one OpenAI shape with the cached-token
usage. A translation bug on either side fails here. A kind the wire package does not speak yet is
skipped (the kinds arrive in the package one by one)."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway_engine import wire
from gateway_engine.kinds import KINDS
from gateway_engine.routing import ProviderConfig

COMMON = {"median_ms": 0, "completion_tokens": 3, "cache_read_ratio": 0.5}
BEDROCK = {"region": "us-east-1", "aws_access_key_id": "AKIASIMULATOR"}
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
CONFIG = {"providers": {
    "gpt": {"kind": "openai", "model": "gpt-sim", "api_key": "ok", **COMMON},
    "claude": {"kind": "anthropic", "model": "claude-sim", "api_key": "ak", "cache_write_ratio": 0.25, **COMMON},
    "gem": {"kind": "gemini", "model": "gemini-sim", "api_key": "gk", **COMMON},
    "az": {"kind": "azure_openai", "model": "gpt-4o-sim", "deployment": "dep", "api_key": "zk",
           "api_version": "2024-10-21", **COMMON},
    "br": {"kind": "bedrock", "model": BEDROCK_MODEL, "api_key": "bedrock/secret+key", **BEDROCK, **COMMON},
}}  # fmt: skip
GATEWAY = {"openai": ("gpt", {}), "anthropic": ("claude", {}), "gemini": ("gem", {}),
           "azure_openai": ("az", {"deployment": "dep", "api_version": "2024-10-21"}), "bedrock": ("br", BEDROCK)}  # fmt: skip
ITEMS = [
    ([{"role": "user", "content": "hello"}], {}),
    ([{"role": "system", "content": "be terse"}, {"role": "user", "content": "hello"}],
     {"max_tokens": 20, "temperature": 0.5, "top_p": 0.9, "stop": ["END"]}),
    ([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
      {"role": "user", "content": "q2"}], {"max_completion_tokens": 10, "stop": "X"}),
    ([{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}],
     {"max_tokens": 5}),
]  # fmt: skip


@pytest.fixture(scope="module")
def sim():
    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


@pytest.mark.parametrize("kind", list(GATEWAY))
def test_the_gateways_requests_pass_the_simulators_validation_and_its_answers_parse(sim, kind):
    try:
        w = wire.for_kind(kind)
    except ValueError:
        pytest.skip(f"gateway_engine.wire does not speak {kind} yet")
    name, extra = GATEWAY[kind]
    model = CONFIG["providers"][name]["model"]
    config = ProviderConfig.from_dict({"name": name, "base_url": sim.kind_url(name, kind), "model": model,
                                       "kind": kind, "api_key": CONFIG["providers"][name]["api_key"],
                                       "rpm": 1000, "tpm": 10**7, "max_concurrency": 10, "burst_seconds": 1,
                                       "timeout_seconds": 10, **extra})  # fmt: skip
    with httpx.Client(timeout=10) as client:
        for messages, params in ITEMS:
            r = post(client, w, config, w.body(config, messages, params))
            assert r.status_code == 200, (messages, params, r.text)
            answer = w.read_answer(r.json())
            assert answer.response["object"] == "chat.completion"
            assert answer.response["choices"][0]["finish_reason"] == "stop"
            assert answer.usage["completion_tokens"] == 3
            if "cached_tokens" in answer.usage:  # read by the wire modules that read the cache
                assert answer.usage["cached_tokens"] == answer.usage["prompt_tokens"] // 2
    assert sim.shape_rejections()[name] == 0
    assert sim.counters()["providers"][name]["auth_rejections"] == 0


# the issue's failure semantics (#21): what each of the simulator's forms must mean to the gateway
FORMS = {
    "openai": {"insufficient_quota": "provider_quota_exhausted", "rate_limit": "rate_limited"},
    "anthropic": {"overloaded": "overloaded", "rate_limit": "rate_limited", "spend_429": "provider_quota_exhausted",
                  "spend_400": "provider_quota_exhausted", "spend_402": "provider_quota_exhausted",
                  "refusal": "content_filter"},
    "gemini": {"overloaded": "overloaded", "per_minute": "rate_limited", "per_day": "per_day",
               "blocked": "client_error"},
    "azure_openai": {"rate_limit": "rate_limited", "input_filter": "client_error", "output_filter": "content_filter"},
    "bedrock": {"rate_limit": "rate_limited", "model_not_ready": "overloaded", "unavailable": "overloaded",
                "server_error": "server_error", "model_timeout": "timeout", "quota": "provider_quota_exhausted"},
}  # fmt: skip


def post(client: httpx.Client, w, config: ProviderConfig, body) -> httpx.Response:
    """One request as the gateway sends it: the body's bytes, signed where the kind signs each request."""
    endpoint = w.endpoint(config)
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **endpoint.headers}
    if KINDS[config.kind].signed:
        headers = w.sign(config, "POST", endpoint.url, headers, data)
    return client.post(endpoint.url, content=data, headers=headers)


@pytest.mark.parametrize("kind", list(GATEWAY))
def test_the_gateway_reads_each_of_the_simulators_fault_forms_as_the_issue_says(sim, kind):
    if tuple(getattr(wire, "KNOWN_KINDS", ())) == ("openai",):  # the seam alone: #21's wire not in yet
        pytest.skip("gateway_engine.wire predates #21's error classification (only the seam)")
    try:
        w = wire.for_kind(kind)
    except ValueError:
        pytest.skip(f"gateway_engine.wire does not speak {kind} yet")
    name, extra = GATEWAY[kind]
    config = ProviderConfig.from_dict({"name": name, "base_url": sim.kind_url(name, kind),
                                       "model": CONFIG["providers"][name]["model"], "kind": kind,
                                       "api_key": CONFIG["providers"][name]["api_key"], "rpm": 1000, "tpm": 10**7,
                                       "max_concurrency": 10, "burst_seconds": 1, "timeout_seconds": 10, **extra})  # fmt: skip
    seen = {}
    with httpx.Client(timeout=10) as client:
        for form in FORMS[kind]:
            body = w.body(config, [{"role": "user", "content": f"[[sim:fault:{form}]] hi"}], {})
            r = post(client, w, config, body)
            if r.status_code == 200:
                answer = w.read_answer(r.json())
                seen[form] = (answer.refusal.error_type if answer.refusal is not None
                              else answer.response["choices"][0]["finish_reason"])  # fmt: skip
                continue
            verdict = w.classify_error(r.status_code, r.json())
            per_day = verdict.pause is not None and verdict.pause.until_epoch is not None
            seen[form] = "per_day" if per_day and form == "per_day" else verdict.error_type
    assert seen == FORMS[kind]

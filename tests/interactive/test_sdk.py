"""The unmodified openai SDK against the interactive lane (uvicorn + gateway_site.asgi, the simulator):
plain calls through every provider kind, models.list(), and the errors the SDK must raise as its usual
classes. What the provider saw is counted at the simulator (per X-Request-ID)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from batches.models import TeamUsageDaily
from teams.services import create_api_key

from .conftest import logged_calls, settled

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"median_ms": 3, "sigma": 0.1, "max_concurrency": 50, "completion_tokens": 5}
KINDS = {
    "gpt": {"kind": "openai", "model": "gpt-sim", "rpm": 6000, "tpm": 1_000_000, **FAST},
    "claude": {"kind": "anthropic", "model": "claude-sim", "rpm": 6000, "itpm": 1_000_000, "otpm": 100_000, **FAST},
    "gemini": {"kind": "gemini", "model": "gemini-sim", "rpm": 6000, "tpm": 1_000_000, **FAST},
    "azure": {"kind": "azure_openai", "model": "gpt-4o-sim", "deployment": "gpt-4o-sim", "api_version": "2024-10-21",
              "rpm": 6000, "tpm": 1_000_000, **FAST},
    # SigV4-signed with this secret access key (the simulator verifies each request's signature)
    "bedrock": {"kind": "bedrock", "model": "anthropic.claude-3-haiku-20240307-v1:0", "region": "us-east-1",
                "aws_access_key_id": "AKIASIMULATOR", "api_key": "bedrock/secret", "rpm": 6000, "tpm": 1_000_000,
                **FAST},
}  # fmt: skip


def kind_providers(sim, make_provider, make_route):
    for name, c in KINDS.items():
        extra = {
            k: c[k] for k in ("deployment", "api_version", "region", "aws_access_key_id", "api_key") if k in c
        }
        if c["kind"] == "azure_openai":
            extra["burst_seconds"] = 1.0
        if c["kind"] == "anthropic":
            extra |= {"itpm": c["itpm"], "otpm": c["otpm"]}
        provider = make_provider(name, kind=c["kind"], base_url=sim.kind_url(name, c["kind"]), model=c["model"],
                                 rpm=c["rpm"], tpm=1_000_000, max_concurrency=20, **extra)  # fmt: skip
        make_route(f"r-{name}", provider)


def test_plain_calls_through_every_kind_are_answered_once_each_and_recorded(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": KINDS})
    kind_providers(sim, make_provider, make_route)
    client = sdk(create_api_key(team, "sdk")[1])
    answers = {}
    for name in KINDS:
        raw = client.chat.completions.with_raw_response.create(
            model=f"r-{name}", messages=[{"role": "user", "content": f"hello {name}"}], max_tokens=16
        )
        answer = raw.parse()
        assert answer.object == "chat.completion" and answer.choices[0].message.content
        assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
        assert raw.headers["x-gateway-provider"] == name and raw.headers["x-gateway-attempts"] == "1"
        answers[name] = answer
    assert sim.shape_rejections() == {name: 0 for name in KINDS}  # every kind's API spoken correctly
    counts = sim.request_counts()
    rows = logged_calls(len(KINDS))
    assert {r.provider for r in rows} == set(KINDS)
    for row in rows:
        assert counts[row.provider] == {row.call_id: 1}  # exactly one request per call at its provider
        assert (row.status, row.http_status, row.attempts, row.stream) == ("succeeded", 200, 1, False)
        assert row.request_body is None and row.response_body is None  # the team did not opt in
        assert (
            row.queue_ms is not None and row.latency_ms is not None
        )  # request in → first send, → answer out
    usage = {u.provider: u for u in TeamUsageDaily.objects.filter(team=team)}
    for name, answer in answers.items():
        assert (usage[name].requests, usage[name].items_succeeded) == (1, 1)
        assert usage[name].prompt_tokens == answer.usage.prompt_tokens


def test_models_list_names_the_routes_and_providers(sim_server, make_provider, make_route, team, sdk):
    sim = sim_server({"time_scale": 1, "providers": KINDS})
    kind_providers(sim, make_provider, make_route)
    models = sdk(create_api_key(team, "sdk")[1]).models.list()
    ids = {m.id: m.owned_by for m in models.data}
    assert ids == {
        **{f"r-{n}": "route" for n in KINDS},
        **{n: f"provider:{c['kind']}" for n, c in KINDS.items()},
    }
    # which endpoints each serves: embeddings only where the kind has an embeddings API
    endpoints = {m.id: m.model_extra["endpoints"] for m in models.data}
    surfaces = ["chat", "responses", "messages"]
    for name, config in KINDS.items():
        embeds = config["kind"] in ("openai", "azure_openai", "gemini")
        expected = ["chat", "embeddings", "responses", "messages"] if embeds else surfaces
        assert endpoints[name] == endpoints[f"r-{name}"] == expected, (name, endpoints[name])


def test_the_sdk_raises_its_usual_classes(sim_server, make_provider, make_route, team, sdk, gateway):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"], "claude": KINDS["claude"]}})
    make_route(
        "chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    )
    claude = make_provider(
        "claude", kind="anthropic", base_url=sim.kind_url("claude", "anthropic"), model="claude-sim"
    )
    make_route("chat", claude, priority=1)  # a fallback: its kind's param ranges apply to the route too
    raw_key = create_api_key(team, "sdk")[1]
    client = sdk(raw_key)
    with pytest.raises(openai.NotFoundError) as nf:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert nf.value.code == "model_not_found" and nf.value.param == "model"
    with pytest.raises(openai.AuthenticationError):
        sdk("bgw_not-a-key").chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "x"}], temperature=9
        )
    assert bad.value.param == "temperature" and "claude" in bad.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="chat", messages=[{"role": "bot", "content": "x"}])
    assert bad.value.param == "messages[0].role"
    for value in ("soon", "-1", "nan"):
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "x"}],
                                           extra_headers={"X-Gateway-Max-Wait": value})  # fmt: skip
        assert bad.value.param == "X-Gateway-Max-Wait"
    settled()
    answer = httpx.post(gateway + "/v1/chat/completions", headers={"Authorization": f"Bearer {raw_key}"},
                        content=b"{not json")  # fmt: skip
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_json"
    assert sim.request_counts().get("gpt", {}) == {}  # nothing refused here reached the provider


def test_a_wait_past_the_callers_limit_is_the_gateways_own_429_and_never_reaches_the_provider(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {**KINDS["gpt"], "rpm": 60}}})
    # rpm 60 with a 1 s burst: one request fits the bucket, the next needs a second of refill
    make_route("chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=60,
                                     burst_seconds=1.0, tpm=10**6))  # fmt: skip
    client = sdk(create_api_key(team, "sdk")[1])
    client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "first"}], max_tokens=5
    )
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "second"}], max_tokens=5,
                                       extra_headers={"X-Gateway-Max-Wait": "0.2"})  # fmt: skip
    error = limited.value
    assert error.code == "gateway_queue_timeout" and error.type == "rate_limit_error"
    assert int(error.response.headers["Retry-After"]) >= 1
    assert sum(sim.request_counts()["gpt"].values()) == 1  # the provider never saw the second call
    assert sim.counters()["providers"]["gpt"]["rate_limited_429"] == 0
    rows = logged_calls(2)
    assert [(r.status, r.http_status, r.attempts) for r in rows] == [
        ("succeeded", 200, 1),
        ("expired", 429, 0),
    ]


def test_retries_go_back_through_the_pool_and_a_4xx_is_not_retried(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server(
        {"time_scale": 1, "providers": {"gpt": {**KINDS["gpt"], "status_script": [500, 429, 200]}}}
    )
    make_route("chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6,
                                     max_retries=3))  # fmt: skip
    client = sdk(create_api_key(team, "sdk")[1])
    raw = client.chat.completions.with_raw_response.create(
        model="chat", messages=[{"role": "user", "content": "x"}]
    )
    assert raw.headers["x-gateway-attempts"] == "3" and raw.parse().choices[0].message.content
    (row,) = logged_calls(1)
    assert [e["status_code"] for e in row.attempt_log] == [500, 429, 200]
    assert sim.request_counts()["gpt"] == {row.call_id: 3}


def test_budgets_and_impossible_asks_are_refused_before_the_provider(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    make_route(
        "chat",
        make_provider(
            "gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=6000, burst_seconds=1.0
        ),
    )  # fmt: skip  (a TPM bucket of 100 tokens)
    client = sdk(create_api_key(team, "sdk")[1])
    with pytest.raises(openai.BadRequestError) as impossible:
        client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "x"}], max_tokens=500
        )
    assert impossible.value.code == "quota_impossible"
    team.daily_token_budget = 20
    team.save()
    settled()
    with pytest.raises(openai.RateLimitError) as broke:
        client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "x"}], max_tokens=50
        )
    assert broke.value.code == "budget_exceeded" and broke.value.type == "insufficient_quota"
    assert broke.value.response.headers["x-should-retry"] == "false"
    assert sim.request_counts().get("gpt", {}) == {}
    assert json.loads(broke.value.response.text)["error"]["param"] is None


def test_a_teams_share_cap_applies_to_its_interactive_calls(
    sim_server, make_provider, make_route, team, other_team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    # 240 rpm with a 2 s bucket: about 7 requests at once; a team capped at a quarter gets about 1.8
    make_route("chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=240,
                                     burst_seconds=2.0, tpm=10**6))  # fmt: skip
    team.max_provider_share = 0.25
    team.save()

    def four_calls(who) -> list[str]:
        client, outcomes = sdk(create_api_key(who, "sdk")[1]), []
        for i in range(4):
            try:
                client.chat.completions.create(model="chat", messages=[{"role": "user", "content": f"{i}"}],
                                               max_tokens=4, extra_headers={"X-Gateway-Max-Wait": "0.05"})  # fmt: skip
                outcomes.append("ok")
            except openai.RateLimitError as exc:
                outcomes.append(exc.code)
        return outcomes

    capped = four_calls(team)
    assert capped[0] == "ok" and "gateway_queue_timeout" in capped, capped
    assert set(capped) == {"ok", "gateway_queue_timeout"}
    assert four_calls(other_team) == ["ok"] * 4  # the provider itself had room: the cap refused them
    assert sum(sim.request_counts()["gpt"].values()) == capped.count("ok") + 4


def test_a_trailing_slash_answers_like_the_canonical_path(
    sim_server, make_provider, make_route, team, gateway
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    make_route(
        "chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    )
    headers = {"Authorization": f"Bearer {create_api_key(team, 'sdk')[1]}"}
    settled()
    answer = httpx.post(gateway + "/v1/chat/completions/", headers=headers, timeout=30,
                        json={"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4})  # fmt: skip
    assert answer.status_code == 200 and answer.json()["object"] == "chat.completion"
    assert httpx.get(gateway + "/v1/models/", headers=headers, timeout=10).json()["object"] == "list"
    wrong = httpx.get(gateway + "/v1/chat/completions", headers=headers, timeout=10)
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"


def test_a_team_that_opted_in_keeps_its_prompts_and_answers_in_the_log(sim_server, make_provider, make_route, team,
                                                                        sdk):  # fmt: skip
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    make_route(
        "chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    )
    team.log_interactive_content = True
    team.save()
    client = sdk(create_api_key(team, "sdk")[1])
    answer = client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "keep me"}],
                                            max_tokens=4)  # fmt: skip
    (row,) = logged_calls(1)
    assert row.request_body["messages"] == [{"role": "user", "content": "keep me"}]
    assert row.response_body["choices"][0]["message"]["content"] == answer.choices[0].message.content

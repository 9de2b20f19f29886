"""Anthropic's ``POST /v1/messages`` end to end (uvicorn + gateway_site.asgi, the simulator, the unmodified
``anthropic`` SDK on ``base_url`` the gateway): ``messages.create`` plain, ``messages.stream`` and with a
tool through an anthropic-kind and an openai-kind provider; ``cache_control`` carried to the anthropic
provider (its prompt cache wrote, then read, the marked prefix); the gateway key in ``x-api-key``;
errors in Anthropic's shape (404 not_found_error, 400 invalid_request_error naming the field, 401)."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from teams.services import create_api_key

from .conftest import logged_calls, settled
from .test_sdk import KINDS, kind_providers

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ("claude", "gpt")
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}  # fmt: skip


@pytest.fixture
def two_kinds(sim_server, make_provider, make_route):
    providers = {n: dict(KINDS[n]) for n in NAMES}
    providers["claude"]["prompt_cache_min_tokens"] = 16  # a short marked prefix is cacheable
    sim = sim_server({"time_scale": 1, "trace_tag_regex": r"tag-(\w+)", "providers": providers})
    for name in NAMES:
        c = KINDS[name]
        extra = {"itpm": c["itpm"], "otpm": c["otpm"]} if c["kind"] == "anthropic" else {}
        provider = make_provider(name, kind=c["kind"], base_url=sim.kind_url(name, c["kind"]), model=c["model"],
                                 rpm=6000, tpm=1_000_000, max_concurrency=20, **extra)  # fmt: skip
        make_route(f"r-{name}", provider)
    return sim


@pytest.fixture
def claude_sdk(gateway):
    def make(raw_key: str) -> anthropic.Anthropic:
        settled()
        return anthropic.Anthropic(base_url=gateway, api_key=raw_key, max_retries=0, timeout=60)

    return make


def tags(sim) -> set[str]:
    return {row["tag"] for row in sim.trace()}


def test_plain_messages_through_both_kinds(two_kinds, team, claude_sdk):
    sim = two_kinds
    client = claude_sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        message = client.messages.create(
            model=f"r-{name}", max_tokens=16, system="Answer briefly.", stop_sequences=["END"],
            messages=[{"role": "user", "content": f"hello tag-{name}"}], metadata={"user_id": "u-1"})  # fmt: skip
        assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
        assert message.content[0].type == "text" and message.content[0].text.startswith(f"[{name}]")
        assert message.stop_reason in ("end_turn", "max_tokens")
        assert message.usage.input_tokens > 0 and 0 < message.usage.output_tokens <= 16
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    assert tags(sim) == set(NAMES)
    rows = logged_calls(2)
    counts = sim.request_counts()
    for row in rows:
        assert row.endpoint == "messages" and counts[row.provider] == {row.call_id: 1}
        assert row.prompt_tokens == -(-len(f"Answer briefly.hello tag-{row.provider}") // 4)


def test_messages_stream_is_anthropics_event_stream(two_kinds, team, claude_sdk):
    sim = two_kinds
    client = claude_sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        with client.messages.stream(model=f"r-{name}", max_tokens=12,
                                    messages=[{"role": "user", "content": f"stream tag-s{name}"}]) as stream:  # fmt: skip
            events = [event.type for event in stream]
            final = stream.get_final_message()
        assert events[0] == "message_start" and events[-1] == "message_stop", events
        assert (
            "content_block_start" in events and "content_block_stop" in events and "message_delta" in events
        )
        text = final.content[0].text
        assert text.startswith(f"[{name}]") and final.stop_reason in ("end_turn", "max_tokens")
        assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    assert tags(sim) == {"sclaude", "sgpt"}
    assert all(r.stream and r.endpoint == "messages" and r.status == "succeeded" for r in logged_calls(2))


def test_a_tool_and_a_tool_round_trip_reach_each_kind_in_its_own_shape(two_kinds, team, claude_sdk):
    sim = two_kinds
    client = claude_sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        message = client.messages.create(
            model=f"r-{name}", max_tokens=20, tools=[WEATHER], tool_choice={"type": "auto"},
            messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21 C"},
                    {"type": "text", "text": f"What should I wear? tag-t{name}"}]},
            ])  # fmt: skip
        assert message.content[0].text.startswith(f"[{name}]")
    # the openai kind was sent tool_calls + a tool message, the anthropic kind tool_use / tool_result blocks
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    assert tags(sim) == {"tclaude", "tgpt"}


def test_cache_control_reaches_the_anthropic_provider(two_kinds, team, claude_sdk):
    sim = two_kinds
    client = claude_sdk(create_api_key(team, "sdk")[1])
    system = [
        {"type": "text", "text": "You are a careful assistant. " * 20, "cache_control": {"type": "ephemeral"}}
    ]
    usages = []
    for i in range(2):
        message = client.messages.create(model="r-claude", max_tokens=8, system=system,
                                         messages=[{"role": "user", "content": f"question {i}"}])  # fmt: skip
        usages.append(message.usage)
    assert usages[0].cache_creation_input_tokens > 0 and usages[0].cache_read_input_tokens == 0
    assert usages[1].cache_read_input_tokens == usages[0].cache_creation_input_tokens
    assert sim.shape_rejections()["claude"] == 0


def test_errors_are_anthropics_and_the_key_may_come_in_x_api_key(two_kinds, team, claude_sdk, gateway):
    sim = two_kinds
    raw_key = create_api_key(team, "sdk")[1]
    client = claude_sdk(raw_key)
    hello = [{"role": "user", "content": "x"}]
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="no-such-model", max_tokens=5, messages=hello)
    assert missing.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="r-claude", max_tokens=5, messages=hello, extra_body={"frobnicate": 1})
    assert bad.value.body["type"] == "error" and bad.value.body["error"]["type"] == "invalid_request_error"
    assert "frobnicate" in bad.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as bad:  # the anthropic kind takes temperature 0–1
        client.messages.create(
            model="r-claude", max_tokens=5, messages=hello, extra_body={"temperature": 1.5}
        )
    assert bad.value.body["error"]["message"].startswith("temperature")
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="r-claude", max_tokens=5, messages=hello, extra_body={"top_k": 5})
    assert bad.value.body["error"]["message"].startswith("top_k")
    with pytest.raises(anthropic.AuthenticationError) as refused:
        anthropic.Anthropic(base_url=gateway, api_key="bgw_not-a-key", max_retries=0).messages.create(
            model="r-claude", max_tokens=5, messages=hello)  # fmt: skip
    assert refused.value.body["error"]["type"] == "authentication_error"
    assert not any(sim.request_counts().values())  # nothing refused here reached a provider
    answer = httpx.post(gateway + "/v1/messages", headers={"x-api-key": raw_key, "anthropic-version": "2023-06-01"},
                        json={"model": "r-claude", "max_tokens": 5, "messages": hello}, timeout=30)  # fmt: skip
    assert answer.status_code == 200 and answer.json()["type"] == "message"
    odd_host = httpx.post(gateway + "/v1/messages", headers={"x-api-key": raw_key, "Host": "evil.example"},
                          json={"model": "r-claude", "max_tokens": 5, "messages": hello}, timeout=30)  # fmt: skip
    assert odd_host.status_code == 400 and odd_host.json()["error"]["type"] == "invalid_request_error"


def test_a_provider_overload_is_anthropics_529_overloaded_error(
    two_kinds, team, claude_sdk, make_provider, make_route
):
    sim = two_kinds
    c = KINDS["claude"]
    busy = make_provider("busy", kind="anthropic", base_url=sim.kind_url("claude", "anthropic"), model=c["model"],
                         rpm=6000, tpm=1_000_000, itpm=c["itpm"], otpm=c["otpm"], max_retries=0)  # fmt: skip
    make_route("r-busy", busy)
    client = claude_sdk(create_api_key(team, "sdk")[1])
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        client.messages.create(model="r-busy", max_tokens=5,
                               messages=[{"role": "user", "content": "[[sim:fault:overloaded]]"}])  # fmt: skip
    assert overloaded.value.status_code == 529
    assert overloaded.value.body["error"]["type"] == "overloaded_error"
    assert sum(sim.request_counts()["claude"].values()) == 1  # one attempt, answered overloaded


def test_every_kind_answers_the_messages_api_plain_and_streamed(
    sim_server, make_provider, make_route, team, claude_sdk
):
    sim = sim_server({"time_scale": 1, "providers": KINDS})
    kind_providers(sim, make_provider, make_route)
    client = claude_sdk(create_api_key(team, "sdk")[1])
    for name in KINDS:
        ask = {"model": f"r-{name}", "max_tokens": 12, "system": "Be brief.",
               "messages": [{"role": "user", "content": f"hi {name}"}]}  # fmt: skip
        assert client.messages.create(**ask).content[0].text.startswith(f"[{name}]"), name
        with client.messages.stream(**ask) as stream:
            assert stream.get_final_message().content[0].text.startswith(f"[{name}]"), name
    assert sim.shape_rejections() == {name: 0 for name in KINDS}
    assert {n: sum(c.values()) for n, c in sim.request_counts().items()} == {n: 2 for n in KINDS}


def test_a_provider_failure_mid_stream_is_an_error_event_the_sdk_raises(two_kinds, team, claude_sdk):
    client = claude_sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        seen = []
        with pytest.raises(anthropic.APIStatusError) as failed:
            with client.messages.stream(model=f"r-{name}", max_tokens=20,
                                        messages=[{"role": "user", "content": "x [[sim:stream_error_after=2]]"}]) as s:  # fmt: skip
                for event in s:
                    seen.append(event.type)
        assert failed.value.body["type"] == "error" and failed.value.body["error"]["type"] in (
            "api_error",
            "overloaded_error",
        )
        assert seen[0] == "message_start" and "text" in seen and "message_stop" not in seen
    rows = logged_calls(2)
    assert all((r.status, r.attempts, r.endpoint) == ("failed", 1, "messages") for r in rows)


def test_an_opted_in_team_logs_the_request_and_answer_in_the_surfaces_shapes(two_kinds, team, claude_sdk):
    team.log_interactive_content = True
    team.save()
    client = claude_sdk(create_api_key(team, "sdk")[1])
    plain = client.messages.create(
        model="r-gpt", max_tokens=8, messages=[{"role": "user", "content": "keep"}]
    )
    with client.messages.stream(
        model="r-claude", max_tokens=8, messages=[{"role": "user", "content": "s"}]
    ) as s:
        streamed = s.get_final_message()
    rows = {r.stream: r for r in logged_calls(2)}
    assert rows[False].request_body["messages"] == [{"role": "user", "content": "keep"}]
    assert rows[False].response_body["type"] == "message" and rows[False].response_body["id"] == plain.id
    assert rows[False].response_body["content"][0]["text"] == plain.content[0].text
    assert rows[True].response_body["type"] == "message"
    assert rows[True].response_body["content"][0]["text"] == streamed.content[0].text

"""``POST /v1/responses`` end to end (uvicorn + gateway_site.asgi, the simulator, the unmodified openai
SDK): ``responses.create`` plain, streamed and with a function tool through an openai-kind and an
anthropic-kind provider — what the provider was sent (its kind's API spoken correctly, one request per
call, the instructions and the input text it read, the output cap it was given) and the Response
objects and events the SDK parsed; the refusals of what a stateless gateway cannot do."""

from __future__ import annotations

import openai
import pytest

from teams.services import create_api_key

from .conftest import logged_calls, settled
from .test_sdk import KINDS, kind_providers

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ("gpt", "claude")
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}  # fmt: skip


@pytest.fixture
def two_kinds(sim_server, make_provider, make_route):
    sim = sim_server(
        {"time_scale": 1, "trace_tag_regex": r"tag-(\w+)", "providers": {n: KINDS[n] for n in NAMES}}
    )
    for name in NAMES:
        c = KINDS[name]
        extra = {"itpm": c["itpm"], "otpm": c["otpm"]} if c["kind"] == "anthropic" else {}
        provider = make_provider(name, kind=c["kind"], base_url=sim.kind_url(name, c["kind"]), model=c["model"],
                                 rpm=6000, tpm=1_000_000, max_concurrency=20, **extra)  # fmt: skip
        make_route(f"r-{name}", provider)
    return sim


def traced(sim) -> dict[str, dict]:
    return {row["tag"]: row for row in sim.trace()}


def test_plain_responses_through_both_kinds(two_kinds, team, sdk):
    sim = two_kinds
    client = sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        raw = client.responses.with_raw_response.create(
            model=f"r-{name}", input=f"hello tag-{name}", instructions="Answer briefly.", max_output_tokens=16,
            temperature=0.5, metadata={"job": name}, store=False)  # fmt: skip
        response = raw.parse()
        assert response.object == "response" and response.id.startswith("resp_")
        assert response.status == "completed" and response.metadata == {"job": name}
        assert response.output_text.startswith(f"[{name}]"), response.output_text
        (item,) = response.output
        assert item.type == "message" and item.role == "assistant" and item.content[0].type == "output_text"
        usage = response.usage
        assert usage.input_tokens > 0 and 0 < usage.output_tokens <= 16
        assert usage.total_tokens == usage.input_tokens + usage.output_tokens
        assert raw.headers["x-gateway-provider"] == name
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    rows = logged_calls(2)
    counts = sim.request_counts()
    for row in rows:
        assert row.endpoint == "responses" and row.call_id.startswith("resp_")
        assert counts[row.provider] == {row.call_id: 1}
    # what the openai-kind provider counted: the prompt it was sent (instructions + input) and the cap
    gpt = traced(sim)["gpt"]
    assert gpt["tokens"] == rows[0].prompt_tokens + 16
    assert rows[0].prompt_tokens == -(-len("Answer briefly.hello tag-gpt") // 4)


def test_a_streamed_response_is_the_responses_event_stream(two_kinds, team, sdk):
    sim = two_kinds
    client = sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        events = list(client.responses.create(model=f"r-{name}", input=f"stream tag-s{name}",
                                              max_output_tokens=12, stream=True))  # fmt: skip
        types = [e.type for e in events]
        assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                             "response.content_part.added"], types  # fmt: skip
        assert types[-4:] == ["response.output_text.done", "response.content_part.done",
                              "response.output_item.done", "response.completed"], types  # fmt: skip
        assert {t for t in types[4:-4]} == {"response.output_text.delta"}
        assert [e.sequence_number for e in events] == list(range(len(events)))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        final = events[-1].response
        assert text.startswith(f"[{name}]") and final.output_text == text
        assert events[-4].text == text and final.status == "completed"
        assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    assert set(traced(sim)) == {"sgpt", "sclaude"}
    counters = sim.counters()["providers"]
    assert {n: counters[n]["streams_completed"] for n in NAMES} == {n: 1 for n in NAMES}
    rows = logged_calls(2)
    assert all(r.stream and r.endpoint == "responses" and r.status == "succeeded" for r in rows)


def test_a_function_tool_and_a_replayed_call_reach_each_kind_in_its_own_shape(two_kinds, team, sdk):
    sim = two_kinds
    client = sdk(create_api_key(team, "sdk")[1])
    history = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
        {"role": "user", "content": "And what should I wear? tag-t{}"},
    ]  # fmt: skip
    for name in NAMES:
        turn = [*history[:-1], {**history[-1], "content": history[-1]["content"].format(name)}]
        response = client.responses.create(model=f"r-{name}", input=turn, tools=[WEATHER], tool_choice="auto",
                                           max_output_tokens=20)  # fmt: skip
        assert response.output_text.startswith(f"[{name}]")
        assert [t.name for t in response.tools] == ["get_weather"] and response.tool_choice == "auto"
    # the anthropic simulator checks tool_use / tool_result blocks as the Messages API does: none refused
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    assert set(traced(sim)) == {"tgpt", "tclaude"}


def test_what_a_stateless_gateway_cannot_do_is_refused_naming_the_field(two_kinds, team, sdk):
    sim = two_kinds
    client = sdk(create_api_key(team, "sdk")[1])
    for field, value in (("previous_response_id", "resp_123"), ("conversation", "conv_1")):
        with pytest.raises(openai.BadRequestError) as bad:
            client.responses.create(model="r-gpt", input="x", **{field: value})
        assert bad.value.param == field and "stateless" in bad.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="r-gpt", input="x", extra_body={"frobnicate": 1})
    assert bad.value.param == "frobnicate" and bad.value.code == "unknown_parameter"
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="r-gpt", input="x", tools=[{"type": "web_search"}])
    assert bad.value.param == "tools[0].type"
    with pytest.raises(openai.BadRequestError) as bad:  # the anthropic wire takes no response_format
        client.responses.create(model="r-claude", input="x", text={"format": {"type": "json_object"}})
    assert bad.value.param == "text.format" and "claude" in bad.value.message
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="no-such-model", input="x")
    assert missing.value.code == "model_not_found"
    assert sim.request_counts() == {} or all(not v for v in sim.request_counts().values())


def test_every_kind_answers_the_responses_api_plain_and_streamed(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": KINDS})
    kind_providers(sim, make_provider, make_route)
    client = sdk(create_api_key(team, "sdk")[1])
    for name in KINDS:
        response = client.responses.create(model=f"r-{name}", input=f"hi {name}", instructions="Be brief.",
                                           max_output_tokens=12)  # fmt: skip
        assert response.output_text.startswith(f"[{name}]") and response.usage.output_tokens > 0, name
        events = list(client.responses.create(model=f"r-{name}", input=f"hi {name}", max_output_tokens=12,
                                              stream=True))  # fmt: skip
        assert events[-1].type == "response.completed" and events[-1].response.output_text.startswith(
            f"[{name}]"
        )
    assert sim.shape_rejections() == {name: 0 for name in KINDS}
    assert {n: sum(c.values()) for n, c in sim.request_counts().items()} == {n: 2 for n in KINDS}


def test_langchain_chat_openai_on_the_responses_api(two_kinds, team, gateway):
    from langchain_openai import ChatOpenAI

    sim = two_kinds
    raw_key = create_api_key(team, "sdk")[1]
    settled()
    for name in NAMES:
        llm = ChatOpenAI(base_url=gateway + "/v1", api_key=raw_key, model=f"r-{name}", max_tokens=12,
                         max_retries=0, use_responses_api=True)  # fmt: skip
        assert llm.invoke(f"hello tag-l{name}").text.startswith(f"[{name}]")
        streamed = "".join(chunk.text for chunk in llm.stream(f"stream tag-m{name}"))
        assert streamed.startswith(f"[{name}]")
    assert sim.shape_rejections() == {name: 0 for name in NAMES}
    assert set(traced(sim)) == {"lgpt", "mgpt", "lclaude", "mclaude"}


def test_a_provider_failure_mid_stream_is_response_failed(two_kinds, team, sdk):
    client = sdk(create_api_key(team, "sdk")[1])
    for name in NAMES:
        events = list(client.responses.create(model=f"r-{name}", input="x [[sim:stream_error_after=2]]",
                                              max_output_tokens=20, stream=True))  # fmt: skip
        assert events[-1].type == "response.failed", [e.type for e in events]
        failed = events[-1].response
        assert failed.status == "failed" and failed.error.code == "server_error" and failed.error.message
        assert len([e for e in events if e.type == "response.output_text.delta"]) == 2
        assert failed.output[0].status == "incomplete" and failed.output_text  # what came before the failure
    rows = logged_calls(2)
    assert all((r.status, r.attempts, r.endpoint) == ("failed", 1, "responses") for r in rows)

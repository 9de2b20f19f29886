"""The Responses surface's translations, pure (no server): a chat answer with tool calls as
``function_call`` output items, a streamed one as the Responses events — every object and event validated
by the openai SDK's own pydantic types —, and the request translation's refusals naming the field."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from interactive.errors import CallError
from interactive.surfaces.responses import RESPONSES, ResponsesWriter, from_chat
from interactive.surfaces.responses_request import chat_request

EVENTS = TypeAdapter(ResponseStreamEvent)
CALL = {
    "id": "call_9",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-sim",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19,
                  "prompt_tokens_details": {"cached_tokens": 4}}}  # fmt: skip


def parse_events(data: bytes) -> list:
    events = []
    for block in data.decode().strip().split("\n\n"):
        head, body = block.split("\n")
        event = EVENTS.validate_python(json.loads(body[len("data: ") :]))
        assert head == f"event: {event.type}"
        events.append(event)
    return events


def test_tool_calls_become_function_call_items():
    body = from_chat("resp_x", "r-gpt", {"tools": [{"type": "function", "name": "get_weather"}]}, CHAT)
    response = Response.model_validate(body)
    (item,) = response.output
    assert (item.type, item.call_id, item.name, json.loads(item.arguments)) == (
        "function_call", "call_9", "get_weather", {"city": "Paris"})  # fmt: skip
    assert response.usage.input_tokens_details.cached_tokens == 4 and response.usage.total_tokens == 19
    assert response.output_text == "" and response.status == "completed"


def test_a_length_stop_is_an_incomplete_response():
    chat = {
        **CHAT,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "cut"}, "finish_reason": "length"}
        ],
    }
    response = Response.model_validate(from_chat("resp_x", "m", {}, chat))
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "cut"


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-sim",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip


def test_streamed_text_then_a_call_is_the_responses_event_sequence():
    writer = ResponsesWriter("resp_y", "r-gpt", {})
    data = writer.chunk(chunk({"role": "assistant", "content": ""}))
    data += writer.chunk(chunk({"content": "Let me "})) + writer.chunk(chunk({"content": "check."}))
    data += writer.chunk(chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                                "function": {"name": "get_weather", "arguments": ""}}]}))  # fmt: skip
    data += writer.chunk(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}))
    data += writer.chunk(
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}, "tool_calls")
    )
    data += writer.done({"usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}})
    events = parse_events(data)
    assert [e.type for e in events] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.output_text == "Let me check." and final.output[1].arguments == '{"city":"Paris"}'
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0, 1]
    assert final.usage.output_tokens == 9


def test_a_failure_after_the_first_event_is_response_failed():
    writer = ResponsesWriter("resp_z", "r-gpt", {})
    events = parse_events(
        writer.chunk(chunk({"content": "half"})) + writer.failed("timeout", "no event in 30 s")
    )
    failed = events[-1].response
    assert events[-1].type == "response.failed" and failed.status == "failed"
    assert (failed.error.code, failed.error.message) == ("server_error", "timeout: no event in 30 s")
    assert failed.output_text == "half"  # what was streamed before the failure


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "input"),
        ({"model": "m", "input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"model": "m", "input": "x", "conversation": {"id": "conv_1"}}, "conversation"),
        ({"model": "m", "input": "x", "reasoning": {"effort": "low"}}, "reasoning"),
        ({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
         "input[0].content[0]"),
        ({"model": "m", "input": "x", "tools": [{"type": "file_search"}]}, "tools[0].type"),
        ({"model": "m", "input": "x", "text": {"format": {"type": "grammar"}}}, "text.format.type"),
        ({"model": "m", "input": "x", "metadata": {"k": 1}}, "metadata.k"),
        ({"model": "m", "input": "x", "stream": "yes"}, "stream"),
    ],
)  # fmt: skip
def test_what_does_not_map_is_refused_naming_the_field(body, param):
    with pytest.raises(CallError) as refused:
        chat_request(body)
    assert refused.value.status == 400 and refused.value.param == param


def test_the_request_maps_onto_chat():
    ask = chat_request({
        "model": "m", "instructions": "sys", "store": True, "max_output_tokens": 9, "tool_choice": {"type": "function", "name": "f"},
        "input": [{"role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                  {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                               {"type": "input_image", "image_url": "https://x/y.png"}]},
                  {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
                  {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
        "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
    })  # fmt: skip
    assert ask.messages == [
        {"role": "system", "content": "sys"}, {"role": "developer", "content": "dev"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
        {"role": "assistant", "content": "ok",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ]  # fmt: skip
    assert ask.params == {"max_completion_tokens": 9, "tool_choice": {"type": "function", "function": {"name": "f"}},
                          "response_format": {"type": "json_schema", "json_schema": {
                              "name": "out", "schema": {"type": "object"}, "strict": True}}}  # fmt: skip
    assert RESPONSES.param("max_completion_tokens") == "max_output_tokens"
    assert RESPONSES.param("messages[2].content") == "input[2].content"

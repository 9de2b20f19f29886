"""The Messages surface's translations, pure (no server): a chat answer with tool calls as ``tool_use``
blocks, a streamed one as Anthropic's events — validated by the anthropic SDK's own pydantic types —, the
error shape of every row of the one error table, ``cache_control`` carried onto the chat parts the
anthropic wire reads, and the refusals naming the field."""

from __future__ import annotations

import json

import pytest
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from gateway_engine.error_kinds import ERROR_KINDS, ErrorType
from interactive.errors import CallError, refusal
from interactive.surfaces.messages import MESSAGES, MessagesWriter, anthropic_error, error_body, from_chat
from interactive.surfaces.messages_request import chat_request

EVENTS = TypeAdapter(RawMessageStreamEvent)
ANTHROPIC_TYPES = {"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
                   "request_too_large", "rate_limit_error", "api_error", "overloaded_error"}  # fmt: skip
CALL = {
    "id": "call_9",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "claude-sim",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Checking.", "tool_calls": [CALL]},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37,
                  "prompt_tokens_details": {"cached_tokens": 10}}}  # fmt: skip


def test_tool_calls_become_tool_use_blocks_and_usage_is_split_as_anthropic_counts_it():
    message = Message.model_validate(from_chat("msg_x", "r-claude", CHAT, cache_write_tokens=5))
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert (message.content[1].id, message.content[1].name, message.content[1].input) == (
        "call_9", "get_weather", {"city": "Paris"})  # fmt: skip
    assert message.stop_reason == "tool_use"
    usage = message.usage  # input_tokens excludes the cache reads and writes, as Anthropic's does
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (
        15,
        10,
        5,
    )


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "claude-sim",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip


def parse(data: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in data.decode().strip().split("\n\n"):
        head, body = block.split("\n")
        out.append((head[len("event: ") :], json.loads(body[len("data: ") :])))
    return out


def test_a_streamed_answer_is_anthropics_event_sequence():
    writer = MessagesWriter("msg_y", "r-claude")
    data = writer.chunk(chunk({"role": "assistant", "content": ""})) + writer.chunk(chunk({"content": "Hi"}))
    data += writer.chunk(chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                                "function": {"name": "get_weather", "arguments": '{"city"'}}]}))  # fmt: skip
    data += writer.chunk(
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ':"Paris"}'}}]}, "tool_calls")
    )
    data += writer.done({"usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}})
    events = parse(data)
    names = [name for name, _ in events]
    assert names == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]  # fmt: skip
    for name, body in events:
        if name != "ping":
            assert EVENTS.validate_python(body).type == name  # the SDK's own event types
    assert events[5][1]["content_block"] == {
        "type": "tool_use",
        "id": "call_9",
        "name": "get_weather",
        "input": {},
    }
    pieces = "".join(
        b["delta"]["partial_json"] for n, b in events if b.get("delta", {}).get("type") == "input_json_delta"
    )
    assert json.loads(pieces) == {"city": "Paris"}
    assert (
        events[-2][1]["delta"]["stop_reason"] == "tool_use" and events[-2][1]["usage"]["output_tokens"] == 9
    )


def test_a_failure_mid_stream_is_an_error_event_of_the_rows_anthropic_type():
    writer = MessagesWriter("msg_z", "r-claude")
    events = parse(writer.chunk(chunk({"content": "half"})) + writer.failed(ErrorType.OVERLOADED, "busy"))
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
    )


@pytest.mark.parametrize("name", sorted(ERROR_KINDS))
def test_every_error_row_has_an_anthropic_shape(name):
    status, body = error_body(refusal(name, "m"))
    assert body == {"type": "error", "error": {"type": body["error"]["type"], "message": "m"}}
    assert body["error"]["type"] in ANTHROPIC_TYPES and status >= 400
    if name == ErrorType.OVERLOADED:
        assert (status, body["error"]["type"]) == (529, "overloaded_error")


def test_statuses_map_to_anthropics_types():
    assert [anthropic_error(s) for s in (400, 401, 403, 404, 413, 429, 500, 502, 503)] == [
        (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
        (404, "not_found_error"), (413, "request_too_large"), (429, "rate_limit_error"), (500, "api_error"),
        (502, "api_error"), (529, "overloaded_error")]  # fmt: skip
    response = MESSAGES.error_response(
        CallError(429, "slow down", "rate_limit_error", None, "x", {"Retry-After": "3"})
    )
    assert response.status_code == 429 and response["Retry-After"] == "3"


def test_cache_control_is_carried_where_the_chat_path_has_a_place_for_it():
    mark = {"type": "ephemeral"}
    ask = chat_request({
        "model": "m", "max_tokens": 10, "cache_control": mark,
        "system": [{"type": "text", "text": "long rules", "cache_control": mark}, {"type": "text", "text": "more"}],
        "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "text", "text": "what is it?"}]}],
    })  # fmt: skip
    assert ask.messages == [
        {"role": "system", "content": [{"type": "text", "text": "long rules", "cache_control": mark}]},
        {"role": "system", "content": [{"type": "text", "text": "more"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                     {"type": "text", "text": "what is it?", "cache_control": mark}]},
    ]  # fmt: skip
    assert ask.params == {"max_completion_tokens": 10}


def test_tools_and_choices_map_onto_chat():
    ask = chat_request({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
                        "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True},
                        "stop_sequences": ["END"], "metadata": {"user_id": "u"}})  # fmt: skip
    assert ask.params == {
        "max_completion_tokens": 5, "stop": ["END"], "user": "u",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "description": "d"}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": False,
    }  # fmt: skip
    assert (
        MESSAGES.param("stop") == "stop_sequences" and MESSAGES.param("max_completion_tokens") == "max_tokens"
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"max_tokens": 5}, "messages"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled"}}, "thinking"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "top_k": 3}, "top_k"),
        ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
         "messages[0].content[0].type"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "bash_20250124", "name": "b"}]},
         "tools[0]"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "sometimes"}},
         "tool_choice"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "r"}]}], "cache_control": {"type": "ephemeral"}},
         "cache_control"),
    ],
)  # fmt: skip
def test_what_does_not_map_is_refused_naming_the_field(body, param):
    with pytest.raises(CallError) as refused:
        chat_request({"model": "m", **body})
    assert refused.value.status == 400 and refused.value.param == param

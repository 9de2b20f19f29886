"""Streaming for kind anthropic (gateway_engine.wire.anthropic_stream): the request (``stream: true``),
the Messages events translated into OpenAI chunks named by the gateway (role chunk, text deltas, tool
calls with argument pieces, the finish chunk mapped like the non-stream answer), thinking left out,
usage with cache counts from message_start + message_delta, ``event: error`` typed like the HTTP answer,
and data that is not a JSON object."""

from __future__ import annotations

import json

import pytest

from gateway_engine.retry import ErrorType
from gateway_engine.wire import SseEvent, StreamError, StreamStep, for_kind, streaming_for_kind
from gateway_engine.wire.anthropic import FINISH_REASONS

from .helpers import config
from .stream_helpers import COMPLETION_ID, CREATED, content, run, run_all_cuts, translated_chunk

MODEL = "claude-opus-4-1-20250805"
CLAUDE = config("anthropic")


def decoder():
    return streaming_for_kind("anthropic").stream_decoder(
        CLAUDE, completion_id=COMPLETION_ID, created=CREATED
    )


def events(*pairs: tuple[str, str]) -> list[bytes]:
    return [f"event: {name}\ndata: {data}\n\n".encode() for name, data in pairs]


START = (
    "message_start",
    '{"type":"message_start","message":{"model":"m","usage":{"input_tokens":3,"output_tokens":1}}}',
)


def test_the_stream_request_is_the_request_with_stream_on():
    wire, messages = streaming_for_kind("anthropic"), [{"role": "user", "content": "hi"}]
    assert wire.stream_endpoint(CLAUDE) == for_kind("anthropic").endpoint(CLAUDE)
    params = {"max_completion_tokens": 50, "temperature": 0.2}
    assert wire.stream_body(CLAUDE, messages, params) == {
        **for_kind("anthropic").body(CLAUDE, messages, params),
        "stream": True,
    }


def test_the_basic_stream_of_the_reference_page():
    out = run_all_cuts("anthropic", "anthropic_stream_text")
    assert out.chunks == [
        translated_chunk(MODEL, {"role": "assistant", "content": ""}),
        translated_chunk(MODEL, {"content": "Hello"}),
        translated_chunk(MODEL, {"content": "!"}),
        translated_chunk(MODEL, {}, "stop"),
    ]
    assert out.done and out.error is None
    assert out.usage == {"prompt_tokens": 25, "completion_tokens": 15, "total_tokens": 40}
    assert out.usage_chunk == {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": 25,
            "completion_tokens": 15,
            "total_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


def test_tool_use_becomes_openai_tool_call_deltas():
    out = run_all_cuts("anthropic", "anthropic_stream_tool_use")
    assert content(out.chunks) == "Okay, let's check the weather for San Francisco, CA:"
    calls = [c for c in out.chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0] == translated_chunk(
        MODEL,
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        },
    )
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in calls[1:]]
    assert all(p.keys() == {"index", "function"} and p["index"] == 0 for p in pieces)
    assert (
        "".join(p["function"]["arguments"] for p in pieces)
        == '{"location": "San Francisco, CA", "unit": "fahrenheit"}'
    )
    assert len(pieces) == 8  # the empty first partial_json is not sent
    assert out.chunks[-1] == translated_chunk(MODEL, {}, "tool_calls")
    assert out.usage == {"prompt_tokens": 472, "completion_tokens": 89, "total_tokens": 561}
    assert out.done


def test_thinking_is_left_out_and_cache_counts_are_in_the_usage():
    out = run_all_cuts("anthropic", "anthropic_stream_thinking_cache")
    model = "claude-sonnet-4-20250514"
    assert out.chunks == [
        translated_chunk(model, {"role": "assistant", "content": ""}),
        translated_chunk(model, {"content": "27 * 453 = 12,231 — ça va."}),
        translated_chunk(model, {}, "length"),
    ]
    # prompt_tokens = input + cache reads + cache writes, as the non-stream usage counts them
    expected = {
        "prompt_tokens": 2012,
        "completion_tokens": 40,
        "total_tokens": 2052,
        "cached_tokens": 200,
        "cache_write_tokens": 1800,
    }
    assert out.usage == expected
    native = {
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 1800,
            "cache_read_input_tokens": 200,
            "output_tokens": 40,
        }
    }
    assert for_kind("anthropic").usage(native) == expected
    assert out.usage_chunk["usage"]["prompt_tokens_details"] == {"cached_tokens": 200}


def test_usage_from_message_start_alone_and_clamped():
    out = run(
        "anthropic",
        events(
            (
                "message_start",
                '{"type":"message_start","message":{"model":"m","usage":{"input_tokens":-4,"output_tokens":1e30}}}',
            )
        ),
    )
    assert out.usage == {"prompt_tokens": 0, "completion_tokens": 10_000_000, "total_tokens": 10_000_000}
    assert not out.done


@pytest.mark.parametrize("stop", sorted(FINISH_REASONS) + ["pause_turn", None])
def test_the_finish_reason_is_mapped_like_the_answer(stop):
    out = run(
        "anthropic",
        events(
            START,
            (
                "message_delta",
                json.dumps(
                    {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 2}}
                ),
            ),
            ("message_stop", '{"type":"message_stop"}'),
        ),
    )
    native = {"content": [{"type": "text", "text": "x"}], "stop_reason": stop}
    expected = for_kind("anthropic").read_answer(native).response["choices"][0]["finish_reason"]
    assert out.chunks[-1] == translated_chunk("m", {}, expected)
    assert [c["choices"][0]["finish_reason"] for c in out.chunks].count(expected) == 1


def test_a_tool_call_whose_input_streamed_nothing_gets_empty_object_arguments():
    out = run(
        "anthropic",
        events(
            START,
            (
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}}',
            ),
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}',
            ),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            (
                "content_block_start",
                '{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"later","input":{}}}',
            ),
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"a\\":1}"}}',
            ),
            ("content_block_stop", '{"type":"content_block_stop","index":1}'),
            (
                "message_delta",
                '{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}',
            ),
            ("message_stop", '{"type":"message_stop"}'),
        ),
    )
    deltas = [c["choices"][0]["delta"] for c in out.chunks]
    assert deltas[1:5] == [
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "now", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "toolu_2",
                    "type": "function",
                    "function": {"name": "later", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 1, "function": {"arguments": '{"a":1}'}}]},
    ]
    assert len(deltas) == 6 and out.chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_message_stop_without_message_delta_still_finishes():
    out = run("anthropic", events(START, ("message_stop", '{"type":"message_stop"}')))
    assert out.chunks == [
        translated_chunk("m", {"role": "assistant", "content": ""}),
        translated_chunk("m", {}, "stop"),
    ]
    assert out.done


def test_ping_and_unknown_events_are_skipped():
    d = decoder()
    assert d.feed(SseEvent("ping", '{"type": "ping"}')) == StreamStep()
    assert d.feed(SseEvent("brand_new", '{"type": "brand_new", "x": 1}')) == StreamStep()
    assert d.usage is None


def test_an_overloaded_error_event():
    out = run_all_cuts("anthropic", "anthropic_stream_overloaded")
    assert content(out.chunks) == "Hello"
    assert out.error == StreamError(ErrorType.OVERLOADED, "Overloaded", "overloaded_error")
    assert not out.done
    assert out.usage == {"prompt_tokens": 25, "completion_tokens": 1, "total_tokens": 26}


@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("overloaded_error", ErrorType.OVERLOADED),
        ("api_error", ErrorType.SERVER_ERROR),
        ("rate_limit_error", ErrorType.RATE_LIMITED),
        ("timeout_error", ErrorType.SERVER_ERROR),
        ("billing_error", ErrorType.PROVIDER_QUOTA_EXHAUSTED),
        ("invalid_request_error", ErrorType.CLIENT_ERROR),
        ("request_too_large", ErrorType.CLIENT_ERROR),
        ("something_new", ErrorType.SERVER_ERROR),
    ],
)
def test_error_types_match_the_http_classification(error_type, expected):
    body = json.dumps({"type": "error", "error": {"type": error_type, "message": "boom"}})
    step = decoder().feed(SseEvent("error", body))
    assert step.error is not None
    assert (step.error.error_type, step.error.message, step.error.code) == (expected, "boom", error_type)
    # a billing error pauses the provider for everyone, in a stream as in an HTTP answer
    assert (step.error.pause is not None) is (expected == ErrorType.PROVIDER_QUOTA_EXHAUSTED)


def test_an_error_with_no_error_object_is_a_server_error():
    step = decoder().feed(SseEvent("error", '{"type":"error"}'))
    assert (
        step.error is not None
        and step.error.error_type == ErrorType.SERVER_ERROR
        and step.error.code == "server_error"
    )


@pytest.mark.parametrize("data", ["event stream", "[]", "null", '{"x": Infinity}'])
def test_data_that_is_not_a_json_object_is_an_invalid_response(data):
    step = decoder().feed(SseEvent("content_block_delta", data))
    assert step.error is not None and step.error.error_type == ErrorType.INVALID_RESPONSE


def test_nothing_is_read_after_message_stop_or_an_error():
    d = decoder()
    d.feed(SseEvent("message_stop", '{"type":"message_stop"}'))
    late = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"late"}}'
    assert d.feed(SseEvent("content_block_delta", late)) == StreamStep()
    d = decoder()
    d.feed(SseEvent("error", '{"type":"error","error":{"type":"api_error","message":"x"}}'))
    assert d.feed(SseEvent("content_block_delta", late)) == StreamStep()


def test_chunks_take_the_configured_model_until_message_start_names_the_providers():
    d = decoder()
    text = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}'
    assert [c["model"] for c in d.feed(SseEvent("content_block_delta", text)).chunks] == [
        "claude-sonnet-4"
    ] * 2

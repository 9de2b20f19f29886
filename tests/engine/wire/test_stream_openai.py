"""Streaming for the OpenAI kinds (gateway_engine.wire.openai_stream): the request (same URL and headers,
``stream`` and ``stream_options.include_usage`` on), the provider's chunks passed through without their
``usage`` field, the usage-only chunk held back (``usage``, ``usage_chunk``), ``[DONE]``, an in-stream
error, data that is not a JSON object, and Azure's filter chunks (the prompt annotation and the
annotations dropped, a ``content_filter`` verdict passed through named like the stream)."""

from __future__ import annotations

import json

import pytest

from gateway_engine.retry import ErrorType
from gateway_engine.wire import SseEvent, StreamError, StreamStep, for_kind, streaming_for_kind

from .helpers import config
from .stream_helpers import COMPLETION_ID, CREATED, content, data_objects, run, run_all_cuts, transcript

MESSAGES = [{"role": "user", "content": "hi"}]


def without_usage(chunk):
    return {k: v for k, v in chunk.items() if k != "usage"}


def decoder(kind="openai"):
    return streaming_for_kind(kind).stream_decoder(config(kind), completion_id=COMPLETION_ID, created=CREATED)


# ---- the request ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
def test_the_stream_request_is_the_request_with_streaming_and_usage_on(kind):
    wire, cfg = streaming_for_kind(kind), config(kind)
    assert wire.stream_endpoint(cfg) == for_kind(kind).endpoint(cfg)
    params = {"temperature": 0.2, "stream_options": {"include_usage": False, "include_obfuscation": False}}
    sent = wire.stream_body(cfg, MESSAGES, params)
    assert sent == {
        **for_kind(kind).body(cfg, MESSAGES, params),
        "stream": True,
        "stream_options": {"include_usage": True, "include_obfuscation": False},
    }
    assert wire.stream_body(cfg, MESSAGES, None)["stream_options"] == {"include_usage": True}
    assert wire.stream_body(cfg, MESSAGES, {"stream": False})["stream"] is True  # reserved: never the item's


# ---- a text answer ----------------------------------------------------------------------------------


def test_a_text_stream_passes_the_chunks_through_and_holds_the_usage_chunk():
    raw = transcript("openai_stream_text")
    sent = data_objects(raw)
    out = run_all_cuts("openai", "openai_stream_text")
    assert out.chunks == [without_usage(c) for c in sent[:4]]  # as they came, without "usage": null
    assert out.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content(out.chunks) == "Hello wörld ☃"
    assert out.chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert out.done and out.error is None
    assert out.usage == {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21, "cached_tokens": 4}
    assert out.usage_chunk == sent[4]  # the provider's own usage chunk: choices [] and its usage object
    assert out.usage_chunk["choices"] == []


def test_tool_calls_pass_through():
    sent = data_objects(transcript("openai_stream_tool_calls"))
    out = run_all_cuts("openai", "openai_stream_tool_calls")
    assert out.chunks == [without_usage(c) for c in sent[:7]]
    calls = [c["choices"][0]["delta"].get("tool_calls") for c in out.chunks]
    assert calls[0] == [
        {
            "index": 0,
            "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        }
    ]
    assert "".join(c[0]["function"]["arguments"] for c in calls if c) == '{"location":"Paris, France"}'
    assert out.chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert out.usage == {"prompt_tokens": 57, "completion_tokens": 17, "total_tokens": 74}
    assert out.done


def test_usage_is_normalized_and_clamped_like_the_answer_usage():
    d = decoder()
    d.feed(SseEvent("", '{"id":"c","choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":1e30}}'))
    assert d.usage == {"prompt_tokens": 0, "completion_tokens": 10_000_000, "total_tokens": 10_000_000}
    assert d.usage == for_kind("openai").usage({"usage": {"prompt_tokens": -5, "completion_tokens": 1e30}})


def test_a_usage_field_on_a_content_chunk_is_read_and_stripped():
    d = decoder()
    step = d.feed(
        SseEvent(
            "",
            '{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,'
            '"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}',
        )
    )
    assert "usage" not in step.chunks[0] and step.chunks[0]["choices"][0]["finish_reason"] == "stop"
    assert d.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert d.usage_chunk() == {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 5,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def test_no_usage_until_the_provider_reports_it():
    d = decoder()
    d.feed(SseEvent("", '{"id":"c","choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}'))
    assert d.usage is None and d.usage_chunk() is None


# ---- errors and the end -----------------------------------------------------------------------------


def test_an_in_stream_error_is_typed_like_the_http_answer():
    out = run_all_cuts("openai", "openai_stream_error")
    assert content(out.chunks) == "Hello"
    assert out.error == StreamError(
        ErrorType.SERVER_ERROR,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
    )
    assert not out.done


@pytest.mark.parametrize(
    ("error", "expected_type", "code"),
    [
        (
            '{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}',
            "rate_limited",
            "rate_limit_exceeded",
        ),
        (
            '{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}',
            "provider_quota_exhausted",
            "insufficient_quota",
        ),
        (
            '{"message":"bad","type":"invalid_request_error","code":null}',
            "client_error",
            "invalid_request_error",
        ),
        ('{"message":"busy","code":503}', "server_error", "server_error"),
        ('"upstream exploded"', "server_error", "server_error"),
    ],
)
def test_in_stream_error_types(error, expected_type, code):
    step = decoder().feed(SseEvent("", '{"error":' + error + "}"))
    assert step.error is not None and step.chunks == [] and not step.done
    assert (step.error.error_type, step.error.code) == (expected_type, code)


def test_error_messages_are_sanitised_and_capped():
    long = "see https://internal.example.com/x for details " + "y" * 500
    step = decoder().feed(SseEvent("", json.dumps({"error": {"message": long, "type": "server_error"}})))
    assert step.error is not None
    assert "internal.example.com" not in step.error.message and len(step.error.message) <= 200


@pytest.mark.parametrize("data", ["not json", "[1, 2]", '"text"', '{"a": NaN}', "{" * 100 + "}" * 100])
def test_data_that_is_not_a_json_object_is_an_invalid_response(data):
    step = decoder().feed(SseEvent("", data))
    assert step.error is not None and step.error.error_type == ErrorType.INVALID_RESPONSE
    assert step.error.code == ErrorType.INVALID_RESPONSE


def test_nul_and_lone_surrogates_are_cleaned_as_in_answers():
    step = decoder().feed(
        SseEvent("", '{"id":"c","choices":[{"index":0,"delta":{"content":"a\\u0000b\\ud800"}}]}')
    )
    assert step.chunks[0]["choices"][0]["delta"]["content"] == "a\ufffdb\ufffd"


def test_done_and_everything_after_done_or_an_error_is_ignored():
    d = decoder()
    assert d.feed(SseEvent("", "[DONE]")) == StreamStep(done=True)
    assert (
        d.feed(SseEvent("", '{"id":"c","choices":[{"index":0,"delta":{"content":"late"}}]}')) == StreamStep()
    )
    d = decoder()
    assert d.feed(SseEvent("", "oops")).error is not None
    assert d.feed(SseEvent("", "[DONE]")) == StreamStep()


# ---- Azure ------------------------------------------------------------------------------------------


def test_azure_drops_the_prompt_filter_chunk_and_passes_a_content_filter_verdict():
    raw = transcript("azure_stream_filtered")
    sent = data_objects(raw)
    out = run_all_cuts("azure_openai", "azure_stream_filtered")
    assert [without_usage(c) for c in sent[1:6]] == out.chunks[:5]  # the completion chunks as they came
    assert content(out.chunks) == "Hey Jude, better"
    assert out.chunks[5] == {  # the verdict, named like the stream's chunks, with an empty delta
        "id": "chatcmpl-8JCbt5d4luUIhYCI7YH4dQK7hnHx2",
        "object": "chat.completion.chunk",
        "created": 1699587397,
        "model": "gpt-35-turbo",
        "choices": [
            {
                "index": 0,
                "finish_reason": "content_filter",
                "content_filter_results": {"protected_material_text": {"detected": True, "filtered": True}},
                "content_filter_offsets": {"check_offset": 65, "start_offset": 65, "end_offset": 1056},
                "delta": {},
            }
        ],
    }
    assert len(out.chunks) == 6 and out.done and out.error is None
    assert out.usage is None and out.usage_chunk is None


def test_azure_default_streaming_with_usage():
    sent = data_objects(transcript("azure_stream_default"))
    out = run_all_cuts("azure_openai", "azure_stream_default")
    assert out.chunks == [without_usage(c) for c in sent[1:6]]
    assert all(c["id"] == "chatcmpl-7rCNsVeZy0PGnX3H6jK8STps5nZUY" and c["choices"] for c in out.chunks)
    assert content(out.chunks) == "Color is a"
    assert out.usage == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    assert out.usage_chunk == sent[6] and out.done


def test_a_filter_verdict_before_any_chunk_is_named_by_the_gateway():
    d = decoder("azure_openai")
    step = d.feed(
        SseEvent(
            "",
            '{"id":"","object":"","created":0,"model":"","choices":[{"index":0,"finish_reason":"content_filter"}]}',
        )
    )
    assert step.chunks == [
        {
            "id": COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "gpt-4o",  # the provider's configured model
            "choices": [{"index": 0, "finish_reason": "content_filter", "delta": {}}],
        }
    ]


def test_azure_stream_error_uses_the_azure_classification():
    out = run(
        "azure_openai",
        [b'data: {"error":{"message":"Requests to the deployment are throttled","code":"429"}}\n\n'],
    )
    assert out.error is not None and out.error.error_type == ErrorType.RATE_LIMITED

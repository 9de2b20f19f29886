"""Streaming for kind gemini (gateway_engine.wire.gemini_stream): the request (``:streamGenerateContent?alt=sse``,
the same headers and body), each streamed GenerateContentResponse translated into OpenAI chunks named by the
gateway (role chunk, text, whole function calls, the finish chunk mapped like the non-stream answer,
thought parts left out), usage from the last usageMetadata, several candidates, the error object, a
blocked prompt, and data that is not a JSON object."""

from __future__ import annotations

import json

import pytest

from gateway_engine.retry import ErrorType
from gateway_engine.wire import SseEvent, StreamError, StreamStep, for_kind, streaming_for_kind
from gateway_engine.wire.gemini import FINISH_REASONS

from .helpers import config
from .stream_helpers import COMPLETION_ID, CREATED, content, run, run_all_cuts, translated_chunk

GEM = config("gemini")
MODEL = "gemini-2.5-flash"


def decoder():
    return streaming_for_kind("gemini").stream_decoder(GEM, completion_id=COMPLETION_ID, created=CREATED)


def feed(d, body) -> StreamStep:
    return d.feed(SseEvent("", json.dumps(body)))


def candidate(parts, finish=None, index=0):
    c = {"content": {"parts": parts, "role": "model"}, "index": index}
    if finish:
        c["finishReason"] = finish
    return c


def test_the_stream_request_is_stream_generate_content_with_alt_sse():
    wire, messages = streaming_for_kind("gemini"), [{"role": "user", "content": "hi"}]
    endpoint = wire.stream_endpoint(GEM)
    assert (
        endpoint.url
        == "https://generativelanguage.test/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert endpoint.headers == for_kind("gemini").endpoint(GEM).headers == {"x-goog-api-key": "sk-test"}
    assert wire.stream_endpoint(config("gemini", model="models/gemini-2.5-pro")).url.endswith(
        "/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert "x-goog-api-key" not in wire.stream_endpoint(config("gemini", api_key="")).headers
    params = {"max_completion_tokens": 50, "temperature": 0.2}
    assert wire.stream_body(GEM, messages, params) == for_kind("gemini").body(GEM, messages, params)


def test_a_text_stream():
    out = run_all_cuts("gemini", "gemini_stream_text")
    assert out.chunks == [
        translated_chunk(MODEL, {"role": "assistant", "content": ""}),
        translated_chunk(MODEL, {"content": "The quick brown"}),
        translated_chunk(MODEL, {"content": " fox jumps — über"}),
        translated_chunk(MODEL, {"content": " the lazy dog."}),
        translated_chunk(MODEL, {}, "stop"),
    ]
    assert out.done and out.error is None
    # like the non-stream usage: completion = candidates + thoughts, cached = cachedContentTokenCount
    assert out.usage == {"prompt_tokens": 9, "completion_tokens": 29, "total_tokens": 38, "cached_tokens": 4}
    assert out.usage_chunk == {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 29,
            "total_tokens": 38,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    }


def test_a_function_call_arrives_whole():
    out = run_all_cuts("gemini", "gemini_stream_function_call")
    assert out.chunks == [
        translated_chunk(MODEL, {"role": "assistant", "content": ""}),
        translated_chunk(
            MODEL,
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_0_0",
                        "type": "function",
                        "function": {
                            "name": "set_light_values",
                            "arguments": '{"brightness": 25, "color_temp": "warm"}',
                        },
                    }
                ]
            },
        ),
        translated_chunk(MODEL, {}, "tool_calls"),  # STOP with a call: tool_calls, as in read_answer
    ]
    assert out.usage == {"prompt_tokens": 120, "completion_tokens": 21, "total_tokens": 141}
    assert out.done


def test_calls_across_responses_are_numbered_and_keep_their_own_ids():
    d = decoder()
    first = feed(d, {"candidates": [candidate([{"functionCall": {"id": "fc-1", "name": "a", "args": {}}}])]})
    second = feed(d, {"candidates": [candidate([{"functionCall": {"name": "b"}}], "STOP")]})
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in first.chunks[1:] + second.chunks[:1]]
    assert [(c["index"], c["id"], c["function"]) for c in calls] == [
        (0, "fc-1", {"name": "a", "arguments": "{}"}),
        (1, "call_0_1", {"name": "b", "arguments": "{}"}),
    ]
    assert second.done


def test_thought_parts_are_left_out():
    d = decoder()
    step = feed(
        d, {"candidates": [candidate([{"text": "hmm", "thought": True}, {"text": "answer"}], "STOP")]}
    )
    assert content(step.chunks) == "answer"


@pytest.mark.parametrize(
    "reason", sorted(FINISH_REASONS) + ["FINISH_REASON_UNSPECIFIED", "MALFORMED_FUNCTION_CALL"]
)
def test_the_finish_reason_is_mapped_like_the_answer(reason):
    native = {"candidates": [candidate([{"text": "x"}], reason)]}
    step = feed(decoder(), native)
    expected = for_kind("gemini").read_answer(native).response["choices"][0]["finish_reason"]
    assert step.chunks[-1] == translated_chunk(MODEL, {}, expected) and step.done


def test_the_stream_is_done_once_every_candidate_finished():
    d = decoder()
    one = feed(d, {"candidates": [candidate([{"text": "a"}], index=0), candidate([{"text": "b"}], index=1)]})
    assert [c["choices"][0]["index"] for c in one.chunks] == [0, 0, 1, 1] and not one.done
    two = feed(d, {"candidates": [candidate([{"text": "!"}], "STOP", index=0)]})
    assert not two.done
    three = feed(d, {"candidates": [candidate([], "MAX_TOKENS", index=1)]})
    assert three.chunks == [translated_chunk(MODEL, {}, "length", index=1)] and three.done


def test_a_response_with_only_usage_updates_the_usage():
    d = decoder()
    assert feed(d, {"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}}) == StreamStep()
    assert d.usage == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    feed(
        d, {"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": -2, "thoughtsTokenCount": 1e30}}
    )
    assert d.usage == for_kind("gemini").usage(
        {"usageMetadata": {"promptTokenCount": 3, "thoughtsTokenCount": 1e30}}
    )


def test_a_blocked_prompt_is_the_client_error_read_answer_refuses():
    out = run_all_cuts("gemini", "gemini_stream_blocked")
    refusal = for_kind("gemini").read_answer({"promptFeedback": {"blockReason": "SAFETY"}}).refusal
    assert refusal is not None
    assert out.error == StreamError(ErrorType.CLIENT_ERROR, refusal.message, "SAFETY")
    assert out.chunks == [] and not out.done
    assert out.usage == {"prompt_tokens": 8, "completion_tokens": 0, "total_tokens": 8}


def test_an_error_object_is_typed_like_the_http_answer():
    out = run_all_cuts("gemini", "gemini_stream_error")
    assert content(out.chunks) == "Once upon"
    assert out.error == StreamError(
        ErrorType.OVERLOADED, "The model is overloaded. Please try again later.", "UNAVAILABLE"
    )
    assert not out.done


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"},
            ErrorType.RATE_LIMITED,
        ),
        (
            {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"},
            ErrorType.SERVER_ERROR,
        ),
        (
            {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"},
            ErrorType.CLIENT_ERROR,
        ),
        ({"message": "no code"}, ErrorType.SERVER_ERROR),
    ],
)
def test_error_objects(error, expected):
    step = feed(decoder(), {"error": error})
    assert step.error is not None and step.error.error_type == expected
    assert step.error.code == error.get("status", expected)


@pytest.mark.parametrize("data", ["<html>502 Bad Gateway</html>", "[{}]", "3"])
def test_data_that_is_not_a_json_object_is_an_invalid_response(data):
    step = decoder().feed(SseEvent("", data))
    assert step.error is not None and step.error.error_type == ErrorType.INVALID_RESPONSE


def test_nothing_is_read_after_done():
    d = decoder()
    assert feed(d, {"candidates": [candidate([{"text": "a"}], "STOP")]}).done
    assert (
        feed(d, {"candidates": [candidate([{"text": "late"}])], "usageMetadata": {"promptTokenCount": 99}})
        == StreamStep()
    )
    assert d.usage is None


def test_an_empty_stream_reports_nothing():
    out = run("gemini", [b""])
    assert (out.chunks, out.error, out.done, out.usage, out.usage_chunk) == ([], None, False, None, None)


def test_chunks_take_the_configured_model_until_a_response_names_its_version():
    cfg = config("gemini", model="gemini-2.0-flash")
    d = streaming_for_kind("gemini").stream_decoder(cfg, completion_id=COMPLETION_ID, created=CREATED)
    assert {c["model"] for c in feed(d, {"candidates": [candidate([{"text": "a"}])]}).chunks} == {
        "gemini-2.0-flash"
    }
    named = feed(d, {"candidates": [candidate([{"text": "b"}])], "modelVersion": "gemini-2.0-flash-001"})
    assert named.chunks[0]["model"] == "gemini-2.0-flash-001"

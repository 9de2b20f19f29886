"""The bedrock wire format: the Converse body built from the ITEM shape, answers and errors read, the
event stream's framing (CRC32 checks, messages split anywhere) and the ConverseStream decoder."""

from __future__ import annotations

import json

import pytest

from gateway_engine.wire import RequestProblems, SseEvent, for_kind
from gateway_engine.wire.bedrock import classify_error, read_answer
from gateway_engine.wire.eventstream import EventStreamError, EventStreamParser, encode_message
from gateway_engine.wire.framing import framing_for

from .helpers import config

WIRE = for_kind("bedrock")


def test_the_converse_body_and_url():
    cfg = config("bedrock")
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "a"},
        {"role": "user", "content": [{"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]
    body = WIRE.body(cfg, messages, {"max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "stop": "END"})
    assert body == {
        "messages": [
            {"role": "user", "content": [{"text": "a"}, {"text": "b"}]},
            {"role": "assistant", "content": [{"text": "c"}]},
            {"role": "user", "content": [{"text": "d"}]},
        ],
        "system": [{"text": "be brief"}],
        "inferenceConfig": {"maxTokens": 9, "temperature": 0.5, "topP": 0.9, "stopSequences": ["END"]},
    }
    url = WIRE.endpoint(cfg).url
    assert (
        url
        == "https://bedrock-runtime.us-east-1.amazonaws.test/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    )
    assert WIRE.endpoint(cfg).headers == {}  # no fixed auth: each request is signed


def test_what_converse_cannot_take_is_refused_naming_the_field():
    cfg = config("bedrock")
    fields = {p.field for p in WIRE.check_params(cfg, {"temperature": 1.5, "logprobs": True, "tools": []})}
    assert fields == {"params.temperature", "params.logprobs", "params.tools"}
    with pytest.raises(RequestProblems, match="messages: the first non-system message must be the user's"):
        WIRE.body(cfg, [{"role": "assistant", "content": "x"}], {})
    parts = [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
    assert [p.field for p in WIRE.check_messages(cfg, [{"role": "user", "content": parts}])] == [
        "messages[0].content[0]"
    ]


def test_signing_adds_a_sigv4_authorization():
    cfg = config("bedrock")
    headers = WIRE.sign(cfg, "POST", WIRE.endpoint(cfg).url, {"Content-Type": "application/json"}, b"{}")
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIATEST/")
    assert (
        "/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date,"
        in headers["Authorization"]
    )


def test_an_answer_is_read_as_a_chat_completion_with_all_input_counted():
    answer = read_answer(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
            "stopReason": "max_tokens",
            "metrics": {"latencyMs": 3},
            "usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 16, "cacheReadInputTokens": 4},
        }
    )
    assert answer.response["choices"][0]["message"]["content"] == "hi"
    assert answer.response["choices"][0]["finish_reason"] == "length"
    assert answer.usage == {
        "prompt_tokens": 14,
        "completion_tokens": 2,
        "total_tokens": 16,
        "cached_tokens": 4,
    }


@pytest.mark.parametrize(
    ("status", "message", "error_type"),
    [
        (429, "Too many requests, please wait before trying again.", "rate_limited"),
        (429, "Model is not ready for inference. Wait and try your request again.", "overloaded"),
        (503, "Bedrock is unable to process your request.", "overloaded"),
        (500, "The server encountered an internal error.", "server_error"),
        (424, "The model failed.", "server_error"),
        (408, "Model has timed out in processing the request.", "timeout"),
        (400, "extraneous key [model] is not permitted", "client_error"),
        (400, "Your request exceeds the service quota for your account.", "provider_quota_exhausted"),
        (403, "The security token included in the request is invalid.", "client_error"),
    ],
)
def test_errors_by_bedrocks_status_and_exception(status, message, error_type):
    verdict = classify_error(status, {"message": message})
    assert verdict.error_type == error_type and verdict.message == message


def frames() -> bytes:
    def event(kind: str, body: dict) -> bytes:
        headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
        return encode_message(headers, json.dumps(body).encode())

    return b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}, "p": "abc"}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo"}}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": "end_turn"}),
            event(
                "metadata",
                {
                    "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
                    "metrics": {"latencyMs": 1},
                },
            ),
        ]
    )


@pytest.mark.parametrize("piece", [1, 7, 10_000])
def test_the_event_stream_is_read_whatever_the_split(piece):
    data, parser, events = frames(), EventStreamParser(), []
    for at in range(0, len(data), piece):
        events += parser.feed(data[at : at + piece])
    assert parser.close() == []
    assert [e.event for e in events] == [
        "event:messageStart",
        "event:contentBlockDelta",
        "event:contentBlockDelta",
        "event:contentBlockStop",
        "event:messageStop",
        "event:metadata",
    ]


def test_a_corrupt_or_cut_event_stream_is_refused():
    data = bytearray(frames())
    data[20] ^= 0xFF  # inside the first message's headers: its message CRC no longer matches
    with pytest.raises(EventStreamError, match="message CRC"):
        EventStreamParser().feed(bytes(data))
    with pytest.raises(EventStreamError, match="prelude CRC"):
        EventStreamParser().feed(b"\x00\x00\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00")
    parser = EventStreamParser()
    parser.feed(frames()[:30])
    with pytest.raises(EventStreamError, match="ended inside a message"):
        parser.close()
    assert framing_for("bedrock").content_type == "application/vnd.amazon.eventstream"
    assert framing_for("openai").content_type == "text/event-stream"


def test_the_decoder_turns_converse_stream_events_into_openai_chunks():
    decoder = WIRE.stream_decoder(config("bedrock"), completion_id="c1", created=5)
    steps = [decoder.feed(e) for e in EventStreamParser().feed(frames())]
    chunks = [c for s in steps for c in s.chunks]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hello"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert [s.done for s in steps] == [False] * 5 + [True]
    assert decoder.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_an_in_stream_exception_is_typed_as_its_http_answer():
    decoder = WIRE.stream_decoder(config("bedrock"), completion_id="c1", created=5)
    step = decoder.feed(SseEvent("exception:throttlingException", '{"message": "Too many requests"}'))
    assert step.error is not None and step.error.error_type == "rate_limited"
    assert step.error.code == "throttlingException"
    assert decoder.feed(SseEvent("event:messageStart", "{}")).chunks == []  # nothing after the error

"""The Gemini generateContent wire format (gateway_engine.wire.gemini): request, answer → OpenAI
shape, usage (cached, thoughts), finish reasons, a blocked prompt, per-day vs per-minute quota
(the Pacific-midnight pause, DST edges), RetryInfo → retry-after, params."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gateway_engine.outcomes import from_answer
from gateway_engine.retry import ErrorType, rate_limit_wait
from gateway_engine.wire import RequestProblems, for_kind
from gateway_engine.wire.gemini import FINISH_REASONS, GeminiWire, classify_error, next_pacific_midnight

from .helpers import config, encoded, fixture

WIRE = GeminiWire()
GEM = config("gemini")
F = fixture("gemini")
USER = [{"role": "user", "content": "hi"}]


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


# ---- the request ------------------------------------------------------------------------------------


def test_endpoint_is_the_models_generate_content_url_with_the_goog_key():
    endpoint = WIRE.endpoint(GEM)
    assert endpoint.url == "https://generativelanguage.test/v1beta/models/gemini-2.5-flash:generateContent"
    assert dict(endpoint.headers) == {"x-goog-api-key": "sk-test"}
    assert WIRE.endpoint(config("gemini", model="models/gemini-2.0-flash", api_key="")).url.endswith(
        "/v1beta/models/gemini-2.0-flash:generateContent"
    )
    assert WIRE.endpoint(config("gemini", api_key="")).headers == {}
    assert for_kind("gemini").kind == "gemini"


def test_contents_roles_and_system_instruction():
    sent = WIRE.body(
        GEM,
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and?"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
                ],
            },
        ],
        None,
    )
    assert sent == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "hello"}]},
            {
                "role": "user",
                "parts": [{"text": "and?"}, {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQ"}}],
            },
        ],
    }


def test_params_translate_to_generation_config():
    sent = WIRE.body(
        GEM,
        USER,
        {
            "max_tokens": 100,
            "temperature": 1.7,
            "top_p": 0.5,
            "stop": ["a", "b"],
            "n": 2,
            "presence_penalty": 0.1,
            "frequency_penalty": -0.1,
            "seed": 7,
            "response_format": {"type": "json_object"},
            "model": "x",
            "stream": False,
        },
    )
    assert sent["generationConfig"] == {
        "maxOutputTokens": 100,
        "temperature": 1.7,
        "topP": 0.5,
        "stopSequences": ["a", "b"],
        "candidateCount": 2,
        "presencePenalty": 0.1,
        "frequencyPenalty": -0.1,
        "seed": 7,
        "responseMimeType": "application/json",
    }
    assert "generationConfig" not in WIRE.body(GEM, USER, {})
    assert WIRE.body(GEM, USER, {"max_completion_tokens": 9, "stop": "x"})["generationConfig"] == {
        "maxOutputTokens": 9,
        "stopSequences": ["x"],
    }


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "schedule_meeting",
            "description": "Schedules a meeting",
            "parameters": {"type": "object", "properties": {"date": {"type": "string"}}},
        },
    }
]


def test_tools_function_calls_and_responses():
    messages = [
        {"role": "user", "content": "Book it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "schedule_meeting", "arguments": '{"date": "2025-03-27"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        {"role": "tool", "tool_call_id": "c1", "content": "plain text"},
    ]
    sent = WIRE.body(GEM, messages, {"tools": TOOLS, "tool_choice": "required"})
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "schedule_meeting",
                    "description": "Schedules a meeting",
                    "parameters": TOOLS[0]["function"]["parameters"],
                }
            ]
        }
    ]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert sent["contents"] == [
        {"role": "user", "parts": [{"text": "Book it"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "schedule_meeting", "args": {"date": "2025-03-27"}}}],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "schedule_meeting", "response": {"ok": True}}},
                {"functionResponse": {"name": "schedule_meeting", "response": {"content": "plain text"}}},
            ],
        },
    ]
    named = WIRE.body(
        GEM, USER, {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "f"}}}
    )
    assert named["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}
    assert WIRE.body(GEM, USER, {"tool_choice": "none"})["toolConfig"] == {
        "functionCallingConfig": {"mode": "NONE"}
    }


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"temperature": 2.5}, "params.temperature", "2.5 is above 2 for provider 'gem' (kind gemini)"),
        ({"top_p": 1.1}, "params.top_p", "1.1 is above 1 for provider 'gem' (kind gemini)"),
        (
            {"stop": ["1", "2", "3", "4", "5", "6"]},
            "params.stop",
            "6 stop sequences, more than 5 for provider 'gem' (kind gemini)",
        ),
        ({"n": 9}, "params.n", "9 is above 8 for provider 'gem' (kind gemini)"),
        ({"presence_penalty": 3}, "params.presence_penalty", "3 is above 2 for provider 'gem' (kind gemini)"),
        ({"seed": "x"}, "params.seed", "'x' is not an integer for provider 'gem' (kind gemini)"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {}}},
            "params.response_format",
            "type 'json_schema' does not map (only text and json_object) for provider 'gem' (kind gemini)",
        ),
        ({"logprobs": True}, "params.logprobs", "not taken by provider 'gem' (kind gemini)"),
        ({"user": "u"}, "params.user", "not taken by provider 'gem' (kind gemini)"),
        ({"logit_bias": {"1": 2}}, "params.logit_bias", "not taken by provider 'gem' (kind gemini)"),
    ],
)
def test_params_problems(params, field, message):
    assert [(p.field, p.message) for p in WIRE.check_params(GEM, params)] == [(field, message)]
    with pytest.raises(RequestProblems):
        WIRE.body(GEM, USER, params)


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}],
                }
            ],
            "messages[0].content[0]",
        ),
        (
            [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}],
            "messages[0].content[0]",
        ),
        ([{"role": "tool", "tool_call_id": "unknown", "content": "x"}], "messages[0]"),
        ([{"role": "critic", "content": "x"}], "messages[0].role"),
    ],
)
def test_unmappable_content_is_refused(messages, field):
    problems = WIRE.check_messages(GEM, messages)
    assert [p.field for p in problems] == [field]
    assert problems[0].message.endswith("for provider 'gem' (kind gemini)")


# ---- the answer -------------------------------------------------------------------------------------


def test_a_text_answer_becomes_a_chat_completion():
    answer = WIRE.read_answer(F["text"])
    r = answer.response
    assert (r["id"], r["object"], r["model"]) == (
        "mJv9aMHdBvPynsEPqbXfiQ4",
        "chat.completion",
        "gemini-2.5-flash",
    )
    assert r["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "AI learns patterns from data to make predictions."},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    # completion = candidates 11 + thoughts 100; prompt 1200 includes the 1000 cached
    assert answer.usage == {
        "prompt_tokens": 1200,
        "completion_tokens": 111,
        "total_tokens": 1311,
        "cached_tokens": 1000,
    }
    assert r["usage"]["prompt_tokens_details"] == {"cached_tokens": 1000}
    assert answer.native is F["text"] and "x_gateway_unmapped" not in r


def test_a_function_call_becomes_tool_calls():
    r = WIRE.read_answer(F["function_call"]).response
    message = r["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "schedule_meeting"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"])["attendees"] == ["Bob", "Alice"]
    assert message["tool_calls"][0]["id"] == "call_0_0"
    assert r["choices"][0]["finish_reason"] == "tool_calls"


def test_thought_parts_are_left_out_and_max_tokens_is_length():
    answer = WIRE.read_answer(F["thought_and_max_tokens"])
    assert answer.response["choices"][0]["message"]["content"] == "The answer is"
    assert answer.response["choices"][0]["finish_reason"] == "length"
    assert answer.response["x_gateway_unmapped"] == ["candidates[0].content.parts[0]: thought part"]
    assert answer.usage["completion_tokens"] == 44


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
    ],
)
def test_finish_reason_table(reason, finish):
    answer = dict(F["text"], candidates=[dict(F["text"]["candidates"][0], finishReason=reason)])
    assert WIRE.read_answer(answer).response["choices"][0]["finish_reason"] == finish
    assert FINISH_REASONS[reason] == finish


@pytest.mark.parametrize("reason", ["OTHER", "MALFORMED_FUNCTION_CALL", None])
def test_other_finish_reasons_are_said_in_unmapped(reason):
    answer = dict(F["text"], candidates=[dict(F["text"]["candidates"][0], finishReason=reason)])
    r = WIRE.read_answer(answer).response
    assert r["x_gateway_unmapped"] == [f"candidates[0].finishReason: {reason!r} has no OpenAI finish_reason"]


def test_several_candidates_become_several_choices():
    first = F["text"]["candidates"][0]
    second = {"content": {"role": "model", "parts": [{"text": "Two"}]}, "finishReason": "STOP", "index": 1}
    r = WIRE.read_answer(dict(F["text"], candidates=[first, second])).response
    assert [c["index"] for c in r["choices"]] == [0, 1] and r["choices"][1]["message"]["content"] == "Two"


def test_a_blocked_prompt_is_a_client_error_refusal_not_retried():
    answer = WIRE.read_answer(F["blocked_prompt"])
    assert answer.response is None and answer.native is F["blocked_prompt"]
    assert answer.refusal.error_type == ErrorType.CLIENT_ERROR
    assert answer.refusal.message == "prompt blocked by the provider (SAFETY)"
    assert not answer.refusal.retryable
    assert answer.usage["prompt_tokens"] == 8


def test_no_candidates_and_no_block_reason_is_an_invalid_response():
    answer = WIRE.read_answer({"usageMetadata": {"promptTokenCount": 3}})
    assert answer.refusal.error_type == ErrorType.INVALID_RESPONSE


# ---- errors, quota, the Pacific-midnight pause --------------------------------------------------------


def test_per_day_quota_is_rate_limited_with_a_pause_to_the_next_pacific_midnight():
    now = utc(2026, 12, 1, 15, 0)  # 07:00 PST
    verdict = classify_error(429, F["per_day_429"], now=now)
    assert verdict.error_type == ErrorType.RATE_LIMITED
    assert verdict.pause.reason == "per_day_quota"
    assert verdict.pause.until_epoch == utc(2026, 12, 2, 8, 0)  # midnight PST = 08:00 UTC
    assert "GenerateRequestsPerDayPerProjectPerModel-FreeTier" in verdict.pause.message
    assert WIRE.classify_error(429, F["per_day_429"]).pause.until_epoch > now


def test_per_minute_quota_has_no_pause_and_its_retry_delay_becomes_retry_after():
    verdict = WIRE.classify_error(429, F["per_minute_429"])
    assert verdict.error_type == ErrorType.RATE_LIMITED and verdict.pause is None and verdict.retryable
    assert WIRE.rate_limit_headers({}, F["per_minute_429"]) == {"retry-after": "1.5"}
    assert rate_limit_wait(WIRE.rate_limit_headers({}, F["per_minute_429"])) == 1.5


def test_a_per_day_answer_gives_no_retry_after_even_with_a_short_retry_delay():
    assert WIRE.rate_limit_headers({"retry-after": "22"}, F["per_day_429"]) == {}


def test_a_bare_resource_exhausted_is_rate_limited_without_pause():
    body = {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
    verdict = WIRE.classify_error(429, body)
    assert (verdict.error_type, verdict.pause) == (ErrorType.RATE_LIMITED, None)
    assert WIRE.rate_limit_headers({}, body) == {}


@pytest.mark.parametrize(
    ("case", "status", "error_type"),
    [
        ("unavailable_503", 503, ErrorType.OVERLOADED),
        ("internal_500", 500, ErrorType.SERVER_ERROR),
        ("deadline_504", 504, ErrorType.SERVER_ERROR),
        ("invalid_400", 400, ErrorType.CLIENT_ERROR),
        ("permission_403", 403, ErrorType.CLIENT_ERROR),
    ],
)
def test_error_classification(case, status, error_type):
    verdict = WIRE.classify_error(status, F[case])
    assert verdict.error_type == error_type and verdict.pause is None
    assert WIRE.classify_error(status, None).error_type == error_type


@pytest.mark.parametrize(
    ("now", "midnight"),
    [
        (utc(2026, 7, 1, 6, 59), utc(2026, 7, 1, 7, 0)),  # 23:59 PDT → midnight PDT (07:00 UTC)
        (utc(2026, 7, 1, 7, 0), utc(2026, 7, 2, 7, 0)),  # exactly midnight: the next one
        (utc(2026, 1, 15, 12, 0), utc(2026, 1, 16, 8, 0)),  # winter: PST, 08:00 UTC
        # spring forward (Sun 8 Mar 2026): the day from midnight PST to midnight PDT is 23 h
        (utc(2026, 3, 8, 9, 0), utc(2026, 3, 9, 7, 0)),
        (utc(2026, 3, 8, 7, 59), utc(2026, 3, 8, 8, 0)),  # 23:59 PST on the 7th
        # fall back (Sun 1 Nov 2026): 25 h day; 01:30 happens twice, both map to the same midnight
        (utc(2026, 11, 1, 8, 30), utc(2026, 11, 2, 8, 0)),  # 01:30 PDT
        (utc(2026, 11, 1, 9, 30), utc(2026, 11, 2, 8, 0)),  # 01:30 PST
        (utc(2026, 10, 31, 20, 0), utc(2026, 11, 1, 7, 0)),  # Sat 13:00 PDT → midnight still PDT
    ],
)
def test_next_pacific_midnight_is_dst_aware(now, midnight):
    assert next_pacific_midnight(now) == midnight


# ---- through outcomes.from_answer ---------------------------------------------------------------------


def test_outcomes_of_an_answer_a_blocked_prompt_and_a_per_day_quota():
    ok = from_answer(WIRE, 200, 3, encoded(F["text"]), {})
    assert ok.ok and ok.body["choices"][0]["finish_reason"] == "stop" and ok.native == F["text"]
    blocked = from_answer(WIRE, 200, 3, encoded(F["blocked_prompt"]), {})
    assert blocked.error_type == ErrorType.CLIENT_ERROR
    assert blocked.message == "prompt blocked by the provider (SAFETY)"
    day = from_answer(WIRE, 429, 3, encoded(F["per_day_429"]), {})
    assert day.error_type == ErrorType.RATE_LIMITED and day.pause.reason == "per_day_quota"
    assert day.headers == {}  # the 22 s retryDelay is not the wait
    minute = from_answer(WIRE, 429, 3, encoded(F["per_minute_429"]), {})
    assert minute.pause is None and minute.headers == {"retry-after": "1.5"}
    overloaded = from_answer(WIRE, 503, 3, encoded(F["unavailable_503"]), {})
    assert overloaded.error_type == ErrorType.OVERLOADED


def test_the_plain_string_fast_path_and_the_general_walk_agree():
    plain = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "U2"},
    ]
    parts = [dict(m, content=[{"type": "text", "text": m["content"]}]) for m in plain]
    assert WIRE.body(GEM, plain, {"top_p": 0.3}) == WIRE.body(GEM, parts, {"top_p": 0.3})
    assert [
        p.field for p in WIRE.check_messages(GEM, [{"role": "assistant", "name": "x", "content": "y"}])
    ] == ["messages[0].name"]


def test_malformed_tool_fields_are_refused_not_crashing():
    messages = [
        {"role": "assistant", "content": "x", "tool_calls": 5},
        {"role": "tool", "tool_call_id": ["not", "a", "str"], "content": "r"},
    ]
    assert [p.field for p in WIRE.check_messages(GEM, messages)] == ["messages[0].tool_calls", "messages[1]"]

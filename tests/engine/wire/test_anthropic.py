"""The Anthropic Messages wire format (gateway_engine.wire.anthropic): the request built from the
OpenAI-style item, the answer read into an OpenAI chat.completion, usage with cache counts, the
finish_reason table, error classification (529, the three spend forms, 429), headers, params."""

from __future__ import annotations

import json

import pytest

from gateway_engine.outcomes import from_answer
from gateway_engine.retry import ErrorType, rate_limit_wait
from gateway_engine.wire import RequestProblems, for_kind
from gateway_engine.wire.anthropic import FINISH_REASONS, AnthropicWire
from gateway_engine.wire.openai import provider_message

from .helpers import config, encoded, fixture

WIRE = AnthropicWire()
CLAUDE = config("anthropic")
MESSAGES = fixture("anthropic_messages")
ERRORS = fixture("anthropic_errors")


def body(messages, params=None, cfg=CLAUDE):
    return WIRE.body(cfg, messages, params)


# ---- the request ------------------------------------------------------------------------------------


def test_endpoint_is_messages_with_x_api_key_and_the_version_header():
    endpoint = WIRE.endpoint(CLAUDE)
    assert endpoint.url == "https://api.anthropic.test/v1/messages"
    assert dict(endpoint.headers) == {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
    assert "x-api-key" not in WIRE.endpoint(config("anthropic", api_key="")).headers
    assert for_kind("anthropic").kind == "anthropic"


def test_system_goes_top_level_and_max_tokens_defaults_to_the_provider_default():
    sent = body([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    assert sent == {
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert body([{"role": "user", "content": "hi"}], cfg=config("anthropic"))["max_tokens"] == 1024
    assert "system" not in body([{"role": "user", "content": "hi"}])


def test_params_translate():
    sent = body(
        [{"role": "user", "content": "hi"}],
        {
            "max_completion_tokens": 50,
            "temperature": 0.2,
            "top_p": 0.9,
            "stop": "END",
            "user": "u-1",
            "model": "ignored",
            "stream": True,
        },
    )
    assert sent["max_tokens"] == 50
    assert (sent["temperature"], sent["top_p"], sent["stop_sequences"]) == (0.2, 0.9, ["END"])
    assert sent["metadata"] == {"user_id": "u-1"}
    assert sent["model"] == "claude-sonnet-4" and "stream" not in sent
    assert body([{"role": "user", "content": "x"}], {"max_tokens": 7, "stop": ["a", "b"]})[
        "stop_sequences"
    ] == ["a", "b"]
    assert body([{"role": "user", "content": "x"}], {"max_tokens": 7})["max_tokens"] == 7


def test_content_parts_map_to_blocks():
    sent = body(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                ],
            }
        ]
    )
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
]


def test_tools_tool_calls_and_tool_results_round_trip():
    messages = [
        {"role": "user", "content": "Weather in SF?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "SF"}'},
                },
                {
                    "id": "toolu_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "LA"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "15 C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "25 C"},
        {"role": "user", "content": "Thanks, compare them."},
    ]
    sent = body(
        messages,
        {
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": False,
        },
    )
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather now",
            "input_schema": TOOLS[0]["function"]["parameters"],
        }
    ]
    assert sent["tool_choice"] == {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}
    assert sent["messages"] == [
        {"role": "user", "content": "Weather in SF?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "SF"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "LA"}},
            ],
        },
        {
            "role": "user",
            "content": [  # the results and the next user turn: one user turn (alternation)
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "15 C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "25 C"},
                {"type": "text", "text": "Thanks, compare them."},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
def test_tool_choice_words(choice, expected):
    assert (
        body([{"role": "user", "content": "x"}], {"tools": TOOLS, "tool_choice": choice})["tool_choice"]
        == expected
    )


# ---- params and content refused -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"temperature": 1.5}, "params.temperature", "1.5 is above 1 for provider 'claude' (kind anthropic)"),
        (
            {"temperature": -0.1},
            "params.temperature",
            "-0.1 is below 0 for provider 'claude' (kind anthropic)",
        ),
        ({"top_p": 2}, "params.top_p", "2 is above 1 for provider 'claude' (kind anthropic)"),
        (
            {"temperature": "hot"},
            "params.temperature",
            "'hot' is not a number for provider 'claude' (kind anthropic)",
        ),
        ({"max_tokens": 0}, "params.max_tokens", "0 is below 1 for provider 'claude' (kind anthropic)"),
        (
            {"max_tokens": 1.5},
            "params.max_tokens",
            "1.5 is not an integer for provider 'claude' (kind anthropic)",
        ),
        ({"n": 2}, "params.n", "not taken by provider 'claude' (kind anthropic)"),
        (
            {"frequency_penalty": 0.5},
            "params.frequency_penalty",
            "not taken by provider 'claude' (kind anthropic)",
        ),
        (
            {"presence_penalty": 0.5},
            "params.presence_penalty",
            "not taken by provider 'claude' (kind anthropic)",
        ),
        ({"logprobs": True}, "params.logprobs", "not taken by provider 'claude' (kind anthropic)"),
        (
            {"response_format": {"type": "json_object"}},
            "params.response_format",
            "not taken by provider 'claude' (kind anthropic)",
        ),
        ({"seed": 1}, "params.seed", "not taken by provider 'claude' (kind anthropic)"),
        ({"logit_bias": {}}, "params.logit_bias", "not taken by provider 'claude' (kind anthropic)"),
        (
            {"stop": [""]},
            "params.stop",
            "must be a non-empty string or a list of non-empty strings for provider 'claude' (kind anthropic)",
        ),
        ({"user": 5}, "params.user", "5 is not a string for provider 'claude' (kind anthropic)"),
        (
            {"tool_choice": "always"},
            "params.tool_choice",
            "'always' is not auto, none, required or a named function for provider 'claude' (kind anthropic)",
        ),
        (
            {"tools": [{"type": "code_interpreter"}]},
            "params.tools",
            "tool 0 is not a function tool (only type function maps) for provider 'claude' (kind anthropic)",
        ),
    ],
)
def test_params_problems_name_the_field_and_the_provider(params, field, message):
    problems = WIRE.check_params(CLAUDE, params)
    assert [(p.field, p.message) for p in problems] == [(field, message)]
    with pytest.raises(RequestProblems) as caught:
        body([{"role": "user", "content": "x"}], params)
    assert f"{field}: {message}" in str(caught.value)


def test_valid_params_have_no_problems_and_reserved_ones_are_left_to_submission():
    ok = {
        "max_tokens": 10,
        "max_completion_tokens": 10,
        "temperature": 1,
        "top_p": 0,
        "stop": ["x"],
        "user": "u",
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "model": "m",
        "stream": False,
    }
    assert WIRE.check_params(CLAUDE, ok) == []
    assert WIRE.reserved_params == frozenset({"model", "messages", "stream"})


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}],
                }
            ],
            "messages[0].content[0]",
        ),
        (
            [
                {
                    "role": "system",
                    "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,x"}}],
                },
                {"role": "user", "content": "x"},
            ],
            "messages[0].content",
        ),
        ([{"role": "function", "content": "x"}], "messages[0].role"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "not json"}}],
                }
            ],
            "messages[0].tool_calls[0]",
        ),
        ([{"role": "tool", "content": "x"}], "messages[0]"),
    ],
)
def test_content_that_cannot_map_is_refused_naming_the_field(messages, field):
    problems = WIRE.check_messages(CLAUDE, messages)
    assert [p.field for p in problems] == [field]
    assert problems[0].message.endswith("for provider 'claude' (kind anthropic)")
    with pytest.raises(RequestProblems):
        body(messages)


# ---- the answer -------------------------------------------------------------------------------------


def test_a_text_answer_becomes_a_chat_completion_with_cache_usage():
    answer = WIRE.read_answer(MESSAGES["text"])
    r = answer.response
    assert r["id"] == "msg_013Zva2CMHLNnXjNJJKqJ2EF" and r["object"] == "chat.completion"
    assert r["model"] == "claude-sonnet-4-20250514" and isinstance(r["created"], int)
    assert r["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi! My name is Claude."},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    # prompt = input 2095 + cache writes 2051 + cache reads 2051
    assert r["usage"] == {
        "prompt_tokens": 6197,
        "completion_tokens": 503,
        "total_tokens": 6700,
        "prompt_tokens_details": {"cached_tokens": 2051},
    }
    assert answer.usage == {
        "prompt_tokens": 6197,
        "completion_tokens": 503,
        "total_tokens": 6700,
        "cached_tokens": 2051,
        "cache_write_tokens": 2051,
    }
    assert "x_gateway_unmapped" not in r
    assert answer.native is MESSAGES["text"] and answer.refusal is None


def test_tool_use_becomes_tool_calls():
    r = WIRE.read_answer(MESSAGES["tool_use"]).response
    message = r["choices"][0]["message"]
    assert message["content"] == "I'll check the current weather in San Francisco for you."
    assert message["tool_calls"] == [
        {
            "id": "toolu_01A09q90qw90lq917835lq9",
            "type": "function",
            "function": {
                "name": "get_weather",
                "arguments": json.dumps({"location": "San Francisco, CA", "unit": "celsius"}),
            },
        }
    ]
    assert r["choices"][0]["finish_reason"] == "tool_calls"
    assert r["usage"]["prompt_tokens"] == 384 and r["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


def test_thinking_blocks_are_left_out_and_listed():
    r = WIRE.read_answer(MESSAGES["thinking"]).response
    assert r["choices"][0]["message"]["content"] == "Based on my analysis..."
    assert r["x_gateway_unmapped"] == ["content[0]: thinking block", "content[1]: redacted_thinking block"]


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "length"),
    ],
)
def test_finish_reason_table(stop_reason, finish):
    answer = dict(MESSAGES["text"], stop_reason=stop_reason)
    r = WIRE.read_answer(answer).response
    assert r["choices"][0]["finish_reason"] == finish and "x_gateway_unmapped" not in r
    assert FINISH_REASONS[stop_reason] == finish


@pytest.mark.parametrize("stop_reason", ["pause_turn", None, "something_new"])
def test_an_unknown_stop_reason_is_said_in_unmapped(stop_reason):
    r = WIRE.read_answer(dict(MESSAGES["text"], stop_reason=stop_reason)).response
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["x_gateway_unmapped"] == [f"stop_reason: {stop_reason!r} has no OpenAI finish_reason"]


def test_usage_is_clamped_and_absent_usage_is_none():
    assert (
        WIRE.usage({"usage": {"input_tokens": -5, "output_tokens": 1e30}})["completion_tokens"] == 10_000_000
    )
    assert WIRE.usage({}) is None and WIRE.usage(None) is None


# ---- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "error_type", "paused"),
    [
        ("overloaded_529", ErrorType.OVERLOADED, False),
        ("rate_limit_429", ErrorType.RATE_LIMITED, False),
        ("spend_429", ErrorType.PROVIDER_QUOTA_EXHAUSTED, True),
        ("spend_400", ErrorType.PROVIDER_QUOTA_EXHAUSTED, True),
        ("spend_400_workspace", ErrorType.PROVIDER_QUOTA_EXHAUSTED, True),
        ("billing_402", ErrorType.PROVIDER_QUOTA_EXHAUSTED, True),
        ("invalid_400", ErrorType.CLIENT_ERROR, False),
        ("auth_401", ErrorType.CLIENT_ERROR, False),
        ("too_large_413", ErrorType.CLIENT_ERROR, False),
        ("api_error_500", ErrorType.SERVER_ERROR, False),
        ("timeout_504", ErrorType.SERVER_ERROR, False),
    ],
)
def test_error_classification(case, error_type, paused):
    status, err = ERRORS[case]["status"], ERRORS[case]["body"]
    verdict = WIRE.classify_error(status, err)
    assert verdict.error_type == error_type
    assert verdict.message == provider_message(status, err)  # the provider's message, sanitised
    assert verdict.message != f"HTTP {status}" or case == "invalid_400"  # ("messages: …" looks like a header)
    assert (verdict.pause is not None) == paused
    if paused:
        assert verdict.pause.reason == "billing" and verdict.pause.until_epoch is None
        assert not verdict.retryable
    assert verdict.retryable == (
        error_type in (ErrorType.OVERLOADED, ErrorType.RATE_LIMITED, ErrorType.SERVER_ERROR)
    )


def test_an_overloaded_error_type_is_overloaded_whatever_the_status_and_529_without_a_body_too():
    assert WIRE.classify_error(529, None).error_type == ErrorType.OVERLOADED
    assert WIRE.classify_error(500, ERRORS["overloaded_529"]["body"]).error_type == ErrorType.OVERLOADED
    assert WIRE.classify_error(529, None).message == "HTTP 529"


# ---- headers ------------------------------------------------------------------------------------------


def test_rate_limit_headers_are_normalized_latest_token_reset_and_fewest_remaining():
    kept = WIRE.rate_limit_headers(ERRORS["headers_429"])
    assert kept == {
        "retry-after": "17",
        "x-ratelimit-reset-requests": "2026-12-01T15:33:00Z",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-tokens": "2026-12-01T15:32:50Z",  # output tokens reset last
        "x-ratelimit-remaining-tokens": "2000",  # output tokens closest to binding
    }
    now = 1_796_139_148.0  # 2026-12-01T15:32:28Z
    assert rate_limit_wait({k: v for k, v in kept.items() if k != "retry-after"}, now=now) == 32.0
    assert rate_limit_wait(kept, now=now) == 17.0
    assert WIRE.rate_limit_headers({"content-type": "application/json"}) == {}


def test_only_the_families_present_are_mapped():
    kept = WIRE.rate_limit_headers(
        {
            "anthropic-ratelimit-input-tokens-reset": "2026-12-01T15:32:45Z",
            "anthropic-ratelimit-input-tokens-remaining": "9",
        }
    )
    assert kept == {"x-ratelimit-reset-tokens": "2026-12-01T15:32:45Z", "x-ratelimit-remaining-tokens": "9"}


# ---- through outcomes.from_answer ---------------------------------------------------------------------


def test_outcome_of_an_answer_holds_the_openai_response_and_the_native_one():
    outcome = from_answer(WIRE, 200, 12, encoded(MESSAGES["text"]), {"request-id": "r"})
    assert outcome.ok and outcome.body["object"] == "chat.completion"
    assert outcome.native == MESSAGES["text"]
    assert outcome.usage["cached_tokens"] == 2051 and outcome.usage["prompt_tokens"] == 6197


def test_outcome_of_a_529_is_overloaded_and_of_a_spend_limit_a_billing_pause():
    overloaded = from_answer(WIRE, 529, 5, encoded(ERRORS["overloaded_529"]["body"]), {})
    assert overloaded.error_type == ErrorType.OVERLOADED and overloaded.pause is None
    spend = ERRORS["spend_429"]
    outcome = from_answer(WIRE, 429, 5, encoded(spend["body"]), ERRORS["headers_429"])
    assert outcome.error_type == ErrorType.PROVIDER_QUOTA_EXHAUSTED
    assert outcome.pause is not None and outcome.pause.reason == "billing"
    assert outcome.headers["x-ratelimit-remaining-tokens"] == "2000"


def test_token_resets_in_other_forms_are_compared_as_times_and_junk_is_skipped():
    kept = WIRE.rate_limit_headers(
        {
            "anthropic-ratelimit-input-tokens-reset": "2026-12-01T16:32:55+01:00",  # 15:32:55Z: the latest
            "anthropic-ratelimit-output-tokens-reset": "2026-12-01T15:32:50.5Z",
            "anthropic-ratelimit-tokens-reset": "soon",
            "anthropic-ratelimit-input-tokens-remaining": "x",
            "anthropic-ratelimit-output-tokens-remaining": "12",
        }
    )
    assert kept == {
        "x-ratelimit-reset-tokens": "2026-12-01T16:32:55+01:00",
        "x-ratelimit-remaining-tokens": "12",
    }
    assert WIRE.rate_limit_headers({"anthropic-ratelimit-tokens-reset": "soon"}) == {}


def test_the_plain_string_fast_path_and_the_general_walk_agree():
    plain = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "U2"},
    ]
    parts = [dict(m, content=[{"type": "text", "text": m["content"]}]) for m in plain]
    assert body(plain, {"temperature": 0.3}) == body(parts, {"temperature": 0.3})
    late_system = [*plain, {"role": "system", "content": "S2"}]
    assert body(late_system)["system"] == "S\n\nS2"


def test_a_participant_name_is_refused():
    problems = WIRE.check_messages(CLAUDE, [{"role": "user", "name": "bob", "content": "x"}])
    assert [(p.field, p.message) for p in problems] == [
        ("messages[0].name", "participant names do not map for provider 'claude' (kind anthropic)")
    ]


def test_malformed_tool_calls_are_refused_not_crashing():
    problems = WIRE.check_messages(CLAUDE, [{"role": "assistant", "content": "x", "tool_calls": 5}])
    assert [p.field for p in problems] == ["messages[0].tool_calls"]

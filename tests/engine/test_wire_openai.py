"""The OpenAI-compatible wire format (gateway_engine.wire.openai) and the kind registry
(gateway_engine.wire.for_kind): request shape, usage parsing, kept rate-limit headers, the
error-classification table, and an unknown kind refused loudly."""

from __future__ import annotations

import asyncio
import math

import pytest
from multidict import CIMultiDict

from gateway_engine.answers import MAX_USAGE_TOKENS
from gateway_engine.http import AiohttpProviderClient, wire_for
from gateway_engine.retry import ErrorType, rate_limit_wait
from gateway_engine.routing import ProviderConfig
from gateway_engine.wire import DEFAULT_KIND, KNOWN_KINDS, UnknownWireKind, WireFormat, for_kind
from gateway_engine.wire.openai import KEEP_HEADERS, RESERVED_PARAMS, OpenAIWire
from tests.local_http import LocalHttp, reply

WIRE = OpenAIWire()
MSG = [{"role": "user", "content": "hi"}]


def config(**overrides: object) -> ProviderConfig:
    entry: dict[str, object] = {
        "name": "alpha",
        "base_url": "http://alpha.test/v1/",
        "model": "alpha-chat",
        "rpm": 60,
        "tpm": 1000,
        "max_concurrency": 2,
        "api_key": "sk-test",
    }
    entry.update(overrides)
    return ProviderConfig.from_dict(entry)


# ---- the registry ----------------------------------------------------------------------------------


def test_for_kind_openai_is_the_openai_wire_and_the_default():
    assert DEFAULT_KIND == "openai"
    assert KNOWN_KINDS == ("anthropic", "azure_openai", "bedrock", "gemini", "openai")
    wire: WireFormat = for_kind("openai")
    assert isinstance(wire, OpenAIWire)
    assert wire.kind == "openai"
    assert isinstance(wire_for(config()), OpenAIWire)  # no kind on ProviderConfig yet: openai


@pytest.mark.parametrize("kind", ["claude", "OpenAI", "", "gemini "])
def test_an_unknown_kind_is_refused_naming_it_and_the_known_ones(kind):
    with pytest.raises(UnknownWireKind) as caught:
        for_kind(kind)
    assert repr(kind) in str(caught.value)
    assert "known kinds are anthropic, azure_openai, bedrock, gemini, openai" in str(caught.value)
    assert isinstance(caught.value, ValueError)


# ---- the request -----------------------------------------------------------------------------------


def test_endpoint_is_base_url_chat_completions_with_bearer_auth():
    endpoint = WIRE.endpoint(config())
    assert endpoint.url == "http://alpha.test/v1/chat/completions"
    assert dict(endpoint.headers) == {"Authorization": "Bearer sk-test"}
    assert WIRE.endpoint(config(base_url="http://alpha.test/v1")).url == endpoint.url
    assert WIRE.endpoint(config(base_url="http://alpha.test/v1///")).url == endpoint.url


def test_no_api_key_no_authorization_header():
    assert dict(WIRE.endpoint(config(api_key="")).headers) == {}


def test_body_is_model_messages_then_params_without_the_reserved_ones():
    params = {"max_tokens": 9, "model": "evil", "messages": [], "stream": True, "temperature": 0.2}
    body = WIRE.body(config(), MSG, params)
    assert body == {"model": "alpha-chat", "messages": MSG, "max_tokens": 9, "temperature": 0.2}
    assert list(body) == ["model", "messages", "max_tokens", "temperature"]
    assert WIRE.body(config(), MSG, None) == {"model": "alpha-chat", "messages": MSG}


def test_reserved_params_belong_to_the_wire_format():
    assert RESERVED_PARAMS == frozenset({"model", "messages", "stream"})
    assert WIRE.reserved_params is RESERVED_PARAMS


def test_the_client_sends_exactly_what_the_wire_format_builds():
    params = {"max_tokens": 9, "stream": True}

    async def call():
        async with LocalHttp() as server:
            server.on("POST", "/v1/chat/completions", reply(200, json={}))
            cfg = config(base_url=server.url("/v1/"))
            client = AiohttpProviderClient(cfg)
            try:
                return cfg, await client.chat(MSG, params), server.last("POST", "/v1/chat/completions")
            finally:
                await client.aclose()

    cfg, outcome, request = asyncio.run(call())
    assert outcome.ok
    assert request.json() == WIRE.body(cfg, MSG, params)
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"


# ---- usage -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}, (3, 5, 8)),
        ({"prompt_tokens": 3, "completion_tokens": 5}, (3, 5, 8)),  # total missing: the sum
        ({"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 0}, (3, 5, 8)),
        ({"prompt_tokens": 2.9, "completion_tokens": 1}, (2, 1, 3)),
        ({"prompt_tokens": -4, "completion_tokens": True, "total_tokens": "7"}, (0, 0, 0)),
        ({"prompt_tokens": math.inf, "completion_tokens": math.nan}, (0, 0, 0)),
        ({"prompt_tokens": 10**12, "completion_tokens": 1}, (MAX_USAGE_TOKENS, 1, MAX_USAGE_TOKENS)),
        ({}, (0, 0, 0)),
    ],
)
def test_usage_counts_are_read_and_clamped(usage, expected):
    got = WIRE.usage({"choices": [], "usage": usage})
    assert got == dict(zip(("prompt_tokens", "completion_tokens", "total_tokens"), expected, strict=True))


@pytest.mark.parametrize("body", [None, [], "text", {"choices": []}, {"usage": None}, {"usage": [1, 2]}])
def test_no_usage_object_no_usage(body):
    assert WIRE.usage(body) is None


# ---- rate-limit headers ----------------------------------------------------------------------------


def test_rate_limit_headers_keep_only_the_openai_ones_case_insensitively():
    headers = CIMultiDict(  # the header type aiohttp answers carry
        {
            "Retry-After": "2",
            "X-RateLimit-Reset-Tokens": "6m0s",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-limit-requests": "60",
            "Content-Type": "application/json",
        }
    )
    kept = WIRE.rate_limit_headers(headers)
    assert kept == {
        "retry-after": "2",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-remaining-requests": "0",
    }
    assert set(kept) <= set(KEEP_HEADERS)
    assert rate_limit_wait(kept) == 2.0  # what the engine reads from them


def test_every_kept_header_is_kept():
    headers = {h: "1" for h in KEEP_HEADERS}
    assert WIRE.rate_limit_headers(headers) == headers
    assert WIRE.rate_limit_headers({}) == {}


# ---- error classification --------------------------------------------------------------------------

CLASSIFICATION = [
    (400, ErrorType.CLIENT_ERROR, False),
    (401, ErrorType.CLIENT_ERROR, False),
    (403, ErrorType.CLIENT_ERROR, False),
    (404, ErrorType.CLIENT_ERROR, False),
    (409, ErrorType.CLIENT_ERROR, False),
    (422, ErrorType.CLIENT_ERROR, False),
    (302, ErrorType.CLIENT_ERROR, False),  # redirects are not followed
    (429, ErrorType.RATE_LIMITED, True),
    (500, ErrorType.SERVER_ERROR, True),
    (502, ErrorType.SERVER_ERROR, True),
    (503, ErrorType.SERVER_ERROR, True),
    (504, ErrorType.SERVER_ERROR, True),
    (529, ErrorType.SERVER_ERROR, True),
    (599, ErrorType.SERVER_ERROR, True),
]


@pytest.mark.parametrize(("status", "error_type", "retryable"), CLASSIFICATION)
def test_classification_table(status, error_type, retryable):
    verdict = WIRE.classify_error(status, None)
    assert (verdict.error_type, verdict.retryable) == (error_type, retryable)
    assert verdict.message == f"HTTP {status}"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": {"message": "model overloaded", "type": "server_error"}}, "model overloaded"),
        ({"error": "bad key"}, "bad key"),
        ({"message": "top-level"}, "top-level"),
        ({"error": {"code": 1}}, "HTTP 503"),
        ({"error": {"message": "see https://internal.example/x for help"}}, "see [url] for help"),
        ({"error": {"message": ""}}, "HTTP 503"),
        (["not", "a", "dict"], "HTTP 503"),
    ],
)
def test_the_team_message_is_the_providers_sanitised_or_http_n(body, message):
    assert WIRE.classify_error(503, body).message == message

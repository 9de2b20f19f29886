"""The Azure OpenAI wire format (gateway_engine.wire.azure_openai): the deployment URL, api-key, an
OpenAI body without model, retry-after-ms, the input content filter, output filtering as an answer."""

from __future__ import annotations

import dataclasses

import pytest

from gateway_engine.outcomes import from_answer
from gateway_engine.retry import ErrorType, rate_limit_wait
from gateway_engine.wire import for_kind
from gateway_engine.wire.azure_openai import AzureOpenAIWire

from .helpers import config, encoded, fixture

WIRE = AzureOpenAIWire()
AZURE = config("azure_openai")
F = fixture("azure_openai")
USER = [{"role": "user", "content": "hi"}]


def test_endpoint_is_the_deployment_url_with_api_version_and_api_key():
    endpoint = WIRE.endpoint(AZURE)
    assert endpoint.url == (
        "https://res.openai.azure.test/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    )
    assert dict(endpoint.headers) == {"api-key": "sk-test"}
    other = WIRE.endpoint(config("azure_openai", deployment="prod-4o", api_key=""))
    assert "/openai/deployments/prod-4o/chat/completions?" in other.url and other.headers == {}
    assert for_kind("azure_openai").kind == "azure_openai"


def test_a_missing_api_version_is_refused_naming_it():
    # the provider file refuses it first (gateway_engine.provider_file.kind_errors) ...
    with pytest.raises(ValueError, match="api_version: required for kind azure_openai"):
        config("azure_openai", api_version="")
    # ... and a config built past it (a dataclass, not the file) is refused by the wire itself
    with pytest.raises(ValueError, match="api_version: required for provider 'azure' .kind azure_openai."):
        WIRE.endpoint(dataclasses.replace(AZURE, api_version=""))


def test_body_is_openai_without_model_and_without_reserved_params():
    assert WIRE.body(AZURE, USER, {"temperature": 3, "model": "x", "stream": True, "n": 2}) == {
        "messages": USER,
        "temperature": 3,
        "n": 2,
    }
    assert WIRE.check_params(AZURE, {"temperature": 3, "logit_bias": {}}) == []


def test_answers_are_openai_answers_and_output_filtering_is_a_normal_answer():
    answer = WIRE.read_answer(F["answer"])
    assert answer.response is F["answer"] and answer.native is None
    assert answer.usage == {"prompt_tokens": 33, "completion_tokens": 557, "total_tokens": 590}
    filtered = from_answer(WIRE, 200, 4, encoded(F["output_filtered"]), {})
    assert filtered.ok and filtered.body["choices"][0]["finish_reason"] == "content_filter"


def test_retry_after_ms_becomes_retry_after_seconds_and_wins():
    case = F["rate_limited_429"]
    kept = WIRE.rate_limit_headers(case["headers"])
    assert kept == {
        "retry-after": "1.5",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-remaining-tokens": "1200",
    }
    assert rate_limit_wait(kept) == 1.5
    assert WIRE.rate_limit_headers({"retry-after-ms": "250"}) == {"retry-after": "0.25"}
    assert WIRE.rate_limit_headers({"retry-after-ms": "60000"}) == {"retry-after": "60"}
    assert WIRE.rate_limit_headers({"retry-after": "3", "retry-after-ms": "junk"}) == {"retry-after": "3"}
    assert WIRE.rate_limit_headers({"retry-after-ms": "-5"}) == {}


def test_the_input_content_filter_is_a_client_error_that_says_so():
    case = F["input_filtered_400"]
    verdict = WIRE.classify_error(case["status"], case["body"])
    assert verdict.error_type == ErrorType.CLIENT_ERROR and not verdict.retryable
    assert verdict.message.startswith(
        "input refused by the provider's content filter: The response was filtered"
    )


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, ErrorType.RATE_LIMITED),
        (500, ErrorType.SERVER_ERROR),
        (503, ErrorType.SERVER_ERROR),
        (400, ErrorType.CLIENT_ERROR),
        (401, ErrorType.CLIENT_ERROR),
        (404, ErrorType.CLIENT_ERROR),
    ],
)
def test_error_classification(status, error_type):
    assert WIRE.classify_error(status, None).error_type == error_type


def test_outcome_of_a_429_keeps_the_precise_wait():
    case = F["rate_limited_429"]
    outcome = from_answer(WIRE, 429, 2, encoded(case["body"]), case["headers"])
    assert outcome.error_type == ErrorType.RATE_LIMITED and outcome.headers["retry-after"] == "1.5"
    ok = from_answer(WIRE, 200, 2, encoded(F["answer"]), {})
    assert ok.ok and ok.body == F["answer"] and ok.native is None

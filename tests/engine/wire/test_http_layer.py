"""Each kind through the httpx ProviderClient (respx: the HTTP layer only): the URL, the auth and
version headers and the JSON body the provider sees, and the answer read back into the OpenAI shape."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx

from gateway_engine.http import ProviderClient
from gateway_engine.retry import ErrorType

from .helpers import config, fixture

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def call(cfg, params):
    async def run():
        client = ProviderClient(cfg)
        try:
            return await client.chat(USER, params)
        finally:
            await client.aclose()

    return asyncio.run(run())


CASES = {
    "anthropic": (
        "https://api.anthropic.test/v1/messages",
        {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"},
        {
            "model": "claude-sonnet-4",
            "max_tokens": 1024,
            "system": "Be brief.",
            "temperature": 0.5,
            "messages": [{"role": "user", "content": "hi"}],
        },
        fixture("anthropic_messages")["text"],
    ),
    "gemini": (
        "https://generativelanguage.test/v1beta/models/gemini-2.5-flash:generateContent",
        {"x-goog-api-key": "sk-test"},
        {
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"temperature": 0.5},
        },
        fixture("gemini")["text"],
    ),
    "azure_openai": (
        "https://res.openai.azure.test/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
        {"api-key": "sk-test"},
        {"messages": USER, "temperature": 0.5},
        fixture("azure_openai")["answer"],
    ),
}


@pytest.mark.parametrize("kind", sorted(CASES))
@respx.mock
def test_the_provider_sees_its_own_url_headers_and_body(kind):
    url, headers, sent, answer = CASES[kind]
    route = respx.post(url).mock(return_value=httpx.Response(200, json=answer))
    outcome = call(config(kind), {"temperature": 0.5})
    request = route.calls.last.request
    assert str(request.url) == url
    for name, value in headers.items():
        assert request.headers[name] == value
    assert "authorization" not in request.headers
    assert json.loads(request.content) == sent
    assert outcome.ok and outcome.body["object"] == "chat.completion"
    assert outcome.body["choices"][0]["finish_reason"] == "stop"
    assert outcome.native == (None if kind == "azure_openai" else answer)


@respx.mock
def test_an_anthropic_529_through_the_client_is_overloaded():
    errors = fixture("anthropic_errors")
    respx.post(CASES["anthropic"][0]).mock(
        return_value=httpx.Response(529, json=errors["overloaded_529"]["body"])
    )
    outcome = call(config("anthropic"), None)
    assert outcome.error_type == ErrorType.OVERLOADED and outcome.status_code == 529

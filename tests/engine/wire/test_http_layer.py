"""Each kind through the engine's provider client (AiohttpProviderClient) against a real local server:
the path, query, auth and version headers and the JSON body the provider sees, and the answer read back
into the OpenAI shape."""

from __future__ import annotations

import asyncio

import pytest

from gateway_engine.http import AiohttpProviderClient
from gateway_engine.retry import ErrorType
from tests.local_http import LocalHttp, reply

from .helpers import config, fixture

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]

# per kind: the base URL's path, the path and query the provider sees, its auth headers, the body, an answer
CASES = {
    "anthropic": (
        "/v1/",
        "/v1/messages",
        {},
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
        "/v1beta",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {},
        {"x-goog-api-key": "sk-test"},
        {
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"temperature": 0.5},
        },
        fixture("gemini")["text"],
    ),
    "azure_openai": (
        "/",
        "/openai/deployments/gpt-4o/chat/completions",
        {"api-version": "2024-10-21"},
        {"api-key": "sk-test"},
        {"messages": USER, "temperature": 0.5},
        fixture("azure_openai")["answer"],
    ),
}


def call(kind: str, path: str, answer, params):
    """One chat call of ``kind`` against a local server answering ``answer`` on ``path``: (outcome, server)."""

    async def scenario():
        async with LocalHttp() as server:
            server.on("POST", path, answer)
            client = AiohttpProviderClient(config(kind, base_url=server.url(CASES[kind][0])))
            try:
                return await client.chat(USER, params), server
            finally:
                await client.aclose()

    return asyncio.run(scenario())


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_provider_sees_its_own_url_headers_and_body(kind):
    _, path, query, headers, sent, answer = CASES[kind]
    outcome, server = call(kind, path, reply(200, json=answer), {"temperature": 0.5})
    (request,) = server.seen
    assert (request.method, request.path, request.query) == ("POST", path, query)
    for name, value in headers.items():
        assert request.headers[name] == value
    assert "authorization" not in request.headers
    assert request.json() == sent
    assert outcome.ok and outcome.body["object"] == "chat.completion"
    assert outcome.body["choices"][0]["finish_reason"] == "stop"
    assert outcome.native == (None if kind == "azure_openai" else answer)


def test_an_anthropic_529_through_the_client_is_overloaded():
    errors = fixture("anthropic_errors")
    outcome, server = call(
        "anthropic", "/v1/messages", reply(529, json=errors["overloaded_529"]["body"]), None
    )
    assert outcome.error_type == ErrorType.OVERLOADED and outcome.status_code == 529
    assert len(server.seen) == 1  # one request: the client never retries

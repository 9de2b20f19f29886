"""Each native kind through the AiohttpProviderClient against a real local HTTP server (aiohttp's
test server, in-process): what the server saw (path, query, headers, JSON body) and the outcome read
from its answer, headers included (aiohttp's case-insensitive multidict, not a dict)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway_engine.http import AiohttpProviderClient
from gateway_engine.retry import ErrorType

from .helpers import config, fixture

USER = [{"role": "user", "content": "hi"}]


async def exchange(kind: str, status: int, answer: Any, headers: dict[str, str], base_path: str):
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=await request.json(),
        )
        return web.json_response(answer, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    server = TestServer(app)
    await server.start_server()
    try:
        client = AiohttpProviderClient(config(kind, base_url=f"http://127.0.0.1:{server.port}{base_path}"))
        try:
            outcome = await client.chat(USER, {"max_tokens": 5})
        finally:
            await client.aclose()
    finally:
        await server.close()
    return seen, outcome


def test_anthropic_through_aiohttp():
    errors = fixture("anthropic_errors")
    seen, outcome = asyncio.run(
        exchange("anthropic", 429, errors["spend_429"]["body"], errors["headers_429"], "/v1")
    )
    assert seen["path"] == "/v1/messages"
    assert seen["headers"]["x-api-key"] == "sk-test" and seen["headers"]["anthropic-version"] == "2023-06-01"
    assert seen["body"] == {"model": "claude-sonnet-4", "max_tokens": 5, "messages": USER}
    assert outcome.error_type == ErrorType.PROVIDER_QUOTA_EXHAUSTED and outcome.pause.reason == "billing"
    assert outcome.headers["x-ratelimit-reset-tokens"] == "2026-12-01T15:32:50Z"
    assert outcome.headers["retry-after"] == "17"


def test_gemini_through_aiohttp():
    seen, outcome = asyncio.run(exchange("gemini", 200, fixture("gemini")["text"], {}, "/v1beta"))
    assert seen["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert seen["headers"]["x-goog-api-key"] == "sk-test"
    assert seen["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"maxOutputTokens": 5},
    }
    assert outcome.ok and outcome.usage["cached_tokens"] == 1000


def test_azure_through_aiohttp():
    case = fixture("azure_openai")["rate_limited_429"]
    seen, outcome = asyncio.run(exchange("azure_openai", 429, case["body"], case["headers"], ""))
    assert seen["path"] == "/openai/deployments/gpt-4o/chat/completions"
    assert seen["query"] == {"api-version": "2024-10-21"}
    assert seen["headers"]["api-key"] == "sk-test"
    assert json.dumps(seen["body"]) == json.dumps({"messages": USER, "max_tokens": 5})
    assert outcome.error_type == ErrorType.RATE_LIMITED and outcome.headers["retry-after"] == "1.5"

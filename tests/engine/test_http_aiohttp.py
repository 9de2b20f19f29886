"""The engine's aiohttp provider client against a real local HTTP server: request shape, outcomes,
no hidden retries, deadline, and keep-alive connections the server closes."""

import asyncio

from aiohttp import web

from gateway_engine.http import AiohttpProviderClient, HttpClients
from gateway_engine.routing import ProviderConfig

from .provider_server import idle_keepalive_rounds

MSG = [{"role": "user", "content": "hi"}]


def config(port: int, **extra) -> ProviderConfig:
    return ProviderConfig.from_dict(
        {
            "name": "alpha",
            "base_url": f"http://127.0.0.1:{port}/v1/",
            "model": "alpha-chat",
            "rpm": 60,
            "tpm": 1000,
            "max_concurrency": 4,
            "timeout_seconds": 0.5,
            "api_key": "sk-test",
            **extra,
        }
    )


async def serve(handler):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


def test_success_sends_openai_shape_and_reads_usage():
    seen = []

    async def handler(request):
        seen.append((dict(request.headers), await request.json()))
        return web.json_response(
            {
                "choices": [{"message": {"content": "ok"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            }
        )

    async def scenario():
        runner, port = await serve(handler)
        client = AiohttpProviderClient(config(port))
        try:
            return await client.chat(MSG, {"max_tokens": 5, "model": "evil"}, request_id="b:1")
        finally:
            await client.aclose()
            await runner.cleanup()

    out = asyncio.run(scenario())
    assert out.ok and out.status_code == 200
    assert out.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert out.body["choices"][0]["message"]["content"] == "ok"
    headers, body = seen[0]
    assert body == {"model": "alpha-chat", "messages": MSG, "max_tokens": 5}  # "model" param not overridable
    assert headers["Authorization"] == "Bearer sk-test"
    assert headers["X-Request-ID"] == "b:1"
    assert headers["Content-Type"] == "application/json"


def test_errors_are_outcomes_and_never_retried():
    calls = []
    answers = [
        web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "2"}),
        web.Response(status=500, text="boom"),
        web.Response(status=200, text="not json"),
        web.Response(status=422, text="bad field"),
    ]

    async def handler(request):
        calls.append(1)
        return answers[len(calls) - 1]

    async def scenario():
        runner, port = await serve(handler)
        client = AiohttpProviderClient(config(port))
        try:
            return [await client.chat(MSG) for _ in answers]
        finally:
            await client.aclose()
            await runner.cleanup()

    limited, boom, not_json, bad = asyncio.run(scenario())
    assert len(calls) == 4  # one request per call
    assert (limited.status_code, limited.error_type, limited.message) == (429, "rate_limited", "slow down")
    assert limited.headers == {"retry-after": "2"}
    # a plain-text error body is kept for staff (detail), never shown to the team
    assert (boom.status_code, boom.error_type, boom.message, boom.detail) == (
        500,
        "server_error",
        "HTTP 500",
        "boom",
    )
    assert (not_json.status_code, not_json.error_type) == (200, "invalid_response")
    assert not_json.message == "answer is not a JSON object" and not_json.detail == "not json"
    assert (bad.status_code, bad.error_type, bad.message, bad.detail) == (
        422,
        "client_error",
        "HTTP 422",
        "bad field",
    )


def test_connection_error_and_timeout():
    async def slow(request):
        await asyncio.sleep(2)
        return web.json_response({})

    async def scenario():
        runner, port = await serve(slow)
        client = AiohttpProviderClient(config(port))
        try:
            timed_out = await client.chat(MSG)
        finally:
            await client.aclose()
            await runner.cleanup()
        refused_client = AiohttpProviderClient(config(port))  # nothing listens there any more
        try:
            refused = await refused_client.chat(MSG)
        finally:
            await refused_client.aclose()
        return timed_out, refused

    timed_out, refused = asyncio.run(scenario())
    assert timed_out.error_type == "timeout" and timed_out.status_code is None
    assert 450 <= timed_out.latency_ms < 1500
    assert refused.error_type == "connection_error" and refused.status_code is None
    assert refused.message


def test_keepalive_connections_closed_by_the_server_are_noticed():
    """A raw socket server that drops each connection 0.2 s after answering (short keep-alive)."""
    outcomes, burst, accepted = asyncio.run(
        idle_keepalive_rounds(lambda port: AiohttpProviderClient(config(port, timeout_seconds=2)), MSG)
    )
    assert [o.error_type for o in outcomes] == ["", "", ""]
    assert all(o.ok for o in burst)
    assert accepted >= 4  # a fresh connection after each idle close, at most 4 for the burst


def test_pool_is_at_least_max_concurrency_and_one_client_per_provider():
    async def check():
        clients = HttpClients()
        a = clients.get(config(1))
        assert clients.get(config(1)) is a
        assert isinstance(a, AiohttpProviderClient)
        assert a._session.connector.limit >= config(1).max_concurrency
        changed = clients.get(config(1, max_concurrency=9))  # a config change mid-run: a new pool
        assert changed is not a and changed._session.connector.limit >= 9
        await clients.aclose()
        assert a._session.closed and changed._session.closed  # the retired pool is closed too

    asyncio.run(check())

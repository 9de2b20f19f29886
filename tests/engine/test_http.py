"""HTTP-layer unit tests (respx): the request shape, outcomes, and no hidden retries."""

import asyncio

import httpx
import respx

from gateway_engine.http import HttpClients, ProviderClient
from gateway_engine.routing import ProviderConfig

from .provider_server import idle_keepalive_rounds

CFG = ProviderConfig.from_dict(
    {
        "name": "alpha",
        "base_url": "http://alpha.test/v1/",
        "model": "alpha-chat",
        "rpm": 60,
        "tpm": 1000,
        "max_concurrency": 7,
        "timeout_seconds": 0.3,
        "api_key": "sk-test",
    }
)
URL = "http://alpha.test/v1/chat/completions"
MSG = [{"role": "user", "content": "hi"}]


def run(coro):
    return asyncio.run(coro)


async def call(params=None):
    client = ProviderClient(CFG)
    try:
        return await client.chat(MSG, params, request_id="b:1")
    finally:
        await client.aclose()


@respx.mock
def test_success_sends_openai_shape_and_reads_usage():
    route = respx.post(URL).mock(
        return_value=httpx.Response(
            200, json={"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
        )
    )
    out = run(call({"max_tokens": 9, "model": "evil"}))
    assert out.ok and out.status_code == 200
    assert out.usage == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    request = route.calls.last.request
    import json

    assert json.loads(request.content) == {"model": "alpha-chat", "messages": MSG, "max_tokens": 9}
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-request-id"] == "b:1"


@respx.mock
def test_errors_are_outcomes_and_never_retried():
    route = respx.post(URL).mock(
        return_value=httpx.Response(
            503, json={"error": {"message": "overloaded"}}, headers={"Retry-After": "3"}
        )
    )
    out = run(call())
    assert (out.status_code, out.error_type, out.message) == (503, "server_error", "overloaded")
    assert out.headers["retry-after"] == "3"
    assert route.call_count == 1
    respx.post(URL).mock(return_value=httpx.Response(422, text="bad field"))
    out = run(call())
    assert (out.status_code, out.error_type, out.message, out.detail) == (
        422,
        "client_error",
        "HTTP 422",
        "bad field",
    )
    respx.post(URL).mock(return_value=httpx.Response(200, text="not json"))
    assert run(call()).error_type == "invalid_response"


@respx.mock
def test_connection_error_and_timeout():
    route = respx.post(URL).mock(side_effect=httpx.ConnectError("refused"))
    out = run(call())
    assert out.error_type == "connection_error" and out.status_code is None and route.call_count == 1

    async def slow(request):
        await asyncio.sleep(2)
        return httpx.Response(200, json={})

    respx.post(URL).mock(side_effect=slow)
    out = run(call())
    assert out.error_type == "timeout"
    assert 250 <= out.latency_ms < 1500


def test_pool_is_at_least_max_concurrency_and_one_client_per_provider():
    async def check():
        clients = HttpClients()  # the engine's default: aiohttp
        a = clients.get(CFG)
        assert clients.get(CFG) is a
        assert a._session.connector.limit >= CFG.max_concurrency
        await clients.aclose()
        assert a._session.closed
        clients = HttpClients(  # an injected httpx transport (public httpx API): the httpx client
            transport_factory=lambda c: httpx.AsyncHTTPTransport(
                retries=0,
                limits=httpx.Limits(
                    max_connections=c.max_concurrency, max_keepalive_connections=c.max_concurrency
                ),
            )
        )
        a = clients.get(CFG)
        assert clients.get(CFG) is a
        assert isinstance(a, ProviderClient)
        await clients.aclose()

    run(check())


def test_httpx_client_notices_a_server_closing_idle_keepalive_connections():
    """A real socket server that drops each connection 0.2 s after answering (like a short keep-alive)."""

    def make_client(port: int) -> ProviderClient:
        cfg = {"name": "ka", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "rpm": 60, "tpm": 1000,
               "max_concurrency": 4, "timeout_seconds": 2}  # fmt: skip
        return ProviderClient(ProviderConfig.from_dict(cfg))

    outcomes, burst, accepted = run(idle_keepalive_rounds(make_client, MSG))
    assert [o.error_type for o in outcomes] == ["", "", ""]
    assert all(o.ok for o in burst)
    assert accepted >= 3  # a fresh connection after each server-side close

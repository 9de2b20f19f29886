"""The provider's own key never reaches a team, whatever its shape (least privilege, second pass): an
upstream whose 401 echoes the key it was sent (``AIza…``, ``gsk_…``, ``xai-…``, ``hf_…``, AWS, or a key of
no known shape) shows ``[redacted]`` in the message (what the batch results and interactive error bodies
carry) and in the staff detail (the attempt log). Before: only ``sk-``, ``key-`` and ``Bearer`` shapes
were taken out, so every other key reached the caller verbatim."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from gateway_engine.answers import sanitize_message
from gateway_engine.http import AiohttpProviderClient
from gateway_engine.routing import ProviderConfig

MSG = [{"role": "user", "content": "hi"}]
KEYS = {
    "gemini": "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "groq": "gsk_9fJ2kLm4Np6Qr8St0Uv2Wx4Yz6Ab8Cd0Ef2Gh4",
    "xai": "xai-Zr7Yq5Xp3Wo1Vn9Um7Tl5Sk3Rj1Qi9Ph7Og5",
    "hf": "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "no shape": "Zq9tL2pW7xK4mR8vB3nJ6cH1fD5gS0aY",
}
# where each kind sends the key, and the path it POSTs to
KINDS = {
    "openai": ("Authorization", "/v1/chat/completions", "/v1"),
    "anthropic": ("x-api-key", "/v1/messages", "/v1"),
    "gemini": ("x-goog-api-key", "/v1beta/models/m:generateContent", "/v1beta"),
    "azure_openai": ("api-key", "/openai/deployments/m/chat/completions", ""),
}


async def _serve(header: str, path: str, padding: int):
    async def echo(request):
        sent = request.headers.get(header, "").removeprefix("Bearer ")
        message = "x" * padding + f"Incorrect API key provided: {sent}. Check your key."
        return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=401)

    app = web.Application()
    app.router.add_post(path, echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


def _config(kind: str, port: int, key: str, prefix: str) -> ProviderConfig:
    extra = {"api_version": "2024-10-21", "burst_seconds": 1} if kind == "azure_openai" else {}
    return ProviderConfig.from_dict(
        {"name": "p", "kind": kind, "base_url": f"http://127.0.0.1:{port}{prefix}", "model": "m", "rpm": 60,
         "tpm": 1000, "max_concurrency": 2, "timeout_seconds": 5, "api_key": key, **extra}
    )  # fmt: skip


def _call(kind: str, key: str, client_class, padding: int = 0):
    header, path, prefix = KINDS[kind]

    async def scenario():
        runner, port = await _serve(header, path, padding)
        client = client_class(_config(kind, port, key, prefix))
        try:
            return await client.chat(MSG, {"max_tokens": 5})
        finally:
            await client.aclose()
            await runner.cleanup()

    return asyncio.run(scenario())


@pytest.mark.parametrize("shape", list(KEYS))
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_echoed_key_of_any_shape_is_redacted(kind, shape):
    key = KEYS[shape]
    outcome = _call(kind, key, AiohttpProviderClient)
    assert outcome.status_code == 401 and outcome.error_type == "client_error"
    assert key not in outcome.message and key[:8] not in outcome.message, outcome.message
    assert "[redacted]" in outcome.message
    assert key not in outcome.detail and "[redacted]" in outcome.detail


@pytest.mark.parametrize("padding", [150, 170, 185])
def test_a_key_cut_by_the_message_limit_leaves_no_piece(padding):
    # the team's message is cut at 200 characters: a key across the cut must not leave its first half
    key = KEYS["no shape"]
    outcome = _call("openai", key, AiohttpProviderClient, padding=padding)
    assert key[:6] not in outcome.message, outcome.message


@pytest.mark.parametrize("shape", [s for s in KEYS if s != "no shape"])
def test_the_common_shapes_are_redacted_without_knowing_the_key(shape):
    shown = sanitize_message(f"bad credentials {KEYS[shape]} for this project")
    assert KEYS[shape] not in shown and shown == "bad credentials [redacted] for this project"

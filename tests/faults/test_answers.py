"""Each broken answer, read by the engine's HTTP client (aiohttp) from the broken provider process,
becomes a clean outcome: stored-safe content, or a clear error type."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway_engine.http import AiohttpProviderClient
from gateway_engine.routing import ProviderConfig

MSG = [{"role": "user", "content": "hi"}]
CAP = 4 * 1024 * 1024  # the default answer cap (GATEWAY_MAX_ANSWER_BYTES)
MAX_USAGE_TOKENS = 10_000_000  # gateway_engine.answers.MAX_USAGE_TOKENS


def config(broken, mode: str) -> ProviderConfig:
    return ProviderConfig.from_dict(
        {
            "name": mode,
            "base_url": broken.url(mode),
            "model": "m",
            "rpm": 60,
            "tpm": 1000,
            "max_concurrency": 2,
            "timeout_seconds": 10,
        }
    )


async def _call(cfg: ProviderConfig):
    client = AiohttpProviderClient(cfg)
    try:
        return await client.chat(MSG, request_id=f"answers-{cfg.name}")
    finally:
        await client.aclose()


@pytest.fixture
def call(broken):
    return lambda mode: asyncio.run(_call(config(broken, mode)))


def stored_safe(value) -> bool:
    """What PostgreSQL jsonb accepts: strict JSON, valid UTF-8, no NUL."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")
    return "\\u0000" not in text and "\x00" not in text


def test_nul_and_lone_surrogates_are_replaced(call):
    for mode, expected in (("nul", "a\ufffdb"), ("surrogate", "x\ufffdy"), ("raw_surrogate", "x\ufffdy")):
        out = call(mode)
        assert out.ok, (mode, out)
        assert out.body["choices"][0]["message"]["content"] == expected
        assert stored_safe(out.body)


def test_nan_usage_is_invalid_response(call):
    out = call("nan")
    assert (out.status_code, out.error_type) == (200, "invalid_response")
    assert "NaN" in out.message and out.usage is None


def test_absurd_usage_is_clamped(call):
    out = call("huge_usage")
    assert out.ok
    assert out.usage == {
        "prompt_tokens": MAX_USAGE_TOKENS,
        "completion_tokens": 1,
        "total_tokens": MAX_USAGE_TOKENS,
    }


@pytest.mark.parametrize("mode", ["big", "big_chunked", "gzip_bomb"])
def test_oversized_answers_are_refused(call, mode):
    out = call(mode)
    assert (out.status_code, out.error_type) == (200, "invalid_response")
    assert f"larger than {CAP} bytes" in out.message
    assert out.body is None


def test_html_on_200_is_invalid_response_and_hides_the_page(call):
    out = call("html")
    assert (out.status_code, out.error_type, out.message) == (200, "invalid_response", "answer is HTML")
    assert "10.1.2.3" in out.detail  # kept for staff only


def test_deep_nesting_is_invalid_response(call):
    out = call("deep")
    assert (out.status_code, out.error_type) == (200, "invalid_response")


def test_error_messages_shown_to_teams_are_sanitised(call):
    out = call("odd_headers")
    assert (out.status_code, out.error_type) == (503, "server_error")
    assert "10.0.0.7" not in out.message and "internal.example" not in out.message
    assert out.message == "upstream [address] failed, see [url]"
    assert "10.0.0.7:8443" in out.detail  # the full body, for staff
    assert out.headers["x-ratelimit-reset"] == "9" * 60


def test_the_broken_provider_counted_every_call(broken, call):
    before = broken.counts()["by_mode"].get("ok", 0)
    assert call("ok").ok
    assert broken.counts()["by_mode"]["ok"] == before + 1

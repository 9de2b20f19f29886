"""Unit tests of the batch-API HTTP layer (gateway_engine.http_batch) and the clients' error reading,
through the httpx transport with respx (the only place respx is used for the batch APIs; the behaviour
against a real server is tests/engine/test_batch_api_clients.py)."""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import gzip
import json

import httpx
import pytest
import respx

from gateway_engine.batch_api import BatchApiError, BatchLine, BatchTarget, for_target
from gateway_engine.http_batch import BatchHttp, multipart_body

BASE = "https://api.example.test/v1"
OPENAI = BatchTarget("openai", BASE, "sk-x", None, None, "gpt-x")
ANTHROPIC = BatchTarget("anthropic", BASE, "sk-ant", None, None, "claude-x")


def run(coro):
    return asyncio.run(coro)


async def get_error(target: BatchTarget, http: BatchHttp) -> BatchApiError:
    client = for_target(target, http=http)
    with pytest.raises(BatchApiError) as caught:
        await client.get("batch_1")
    await http.aclose()
    return caught.value


@respx.mock
def test_status_classification_follows_the_wire_formats():
    route = respx.get(f"{BASE}/batches/batch_1")
    cases = [
        (httpx.Response(429, headers={"retry-after": "3"}, json={"error": {"message": "slow down", "type": "requests"}}),
         (429, True, "rate_limited", 3.0)),
        (httpx.Response(503, json={"error": {"message": "busy"}}), (503, True, "server_error", None)),
        (httpx.Response(400, json={"error": {"message": "bad"}}), (400, False, "client_error", None)),
        (httpx.Response(404, text="<html>nope</html>"), (404, False, "client_error", None)),
        (httpx.Response(429, json={"error": {"message": "You exceeded your current quota",
                                             "type": "insufficient_quota", "code": "insufficient_quota"}}),
         (429, False, "provider_quota_exhausted", None)),
    ]  # fmt: skip
    for response, expected in cases:
        route.mock(return_value=response)
        err = run(get_error(OPENAI, BatchHttp(transport="httpx")))
        assert (err.status, err.retryable, err.error_type, err.retry_after) == expected


@respx.mock
def test_anthropic_overload_is_retryable_and_a_2xx_that_is_not_json_is_invalid():
    respx.get(f"{BASE}/messages/batches/batch_1").mock(
        return_value=httpx.Response(
            529, json={"type": "error", "error": {"type": "overloaded_error", "message": "x"}}
        )
    )
    err = run(get_error(ANTHROPIC, BatchHttp(transport="httpx")))
    assert (err.status, err.retryable, err.error_type) == (529, True, "overloaded")
    respx.get(f"{BASE}/batches/batch_1").mock(return_value=httpx.Response(200, text="ok"))
    err = run(get_error(OPENAI, BatchHttp(transport="httpx")))
    assert (err.retryable, err.error_type) == (True, "invalid_response")


@respx.mock
def test_answers_are_capped_and_decompressed_with_the_cap():
    respx.get(f"{BASE}/files/f/content").mock(
        return_value=httpx.Response(
            200, content=gzip.compress(b"x" * 100_000), headers={"content-encoding": "gzip"}
        )
    )

    async def scenario(cap: int):
        http = BatchHttp(transport="httpx", max_download_bytes=cap)
        try:
            return await http.request("GET", f"{BASE}/files/f/content", headers={}, download=True)
        finally:
            await http.aclose()

    small, large = run(scenario(10_000)), run(scenario(200_000))
    assert (small.ok, small.error_type) == (False, "invalid_response")  # a gzip bomb stops at the cap
    assert large.ok and large.body == b"x" * 100_000


@respx.mock
def test_the_upload_is_a_multipart_file_named_after_the_chunk():
    upload = respx.post(f"{BASE}/files").mock(
        return_value=httpx.Response(200, json={"id": "file-1", "object": "file", "purpose": "batch"})
    )
    create = respx.post(f"{BASE}/batches").mock(
        return_value=httpx.Response(
            200,
            json={
                "id": "batch_1",
                "object": "batch",
                "status": "validating",
                "created_at": 1700000000,
                "expires_at": 1700086400,
                "request_counts": {"total": 1, "completed": 0, "failed": 0},
                "metadata": {"gateway_chunk": "chunk-9"},
            },
        )  # fmt: skip
    )
    line = BatchLine("chunk-9-0", {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]})

    async def scenario():
        client = for_target(OPENAI, http=BatchHttp(transport="httpx"))
        try:
            return client, await client.create("chunk-9", [line])
        finally:
            await client.aclose()

    client, remote = run(scenario())
    sent = upload.calls.last.request
    assert sent.headers["authorization"] == "Bearer sk-x"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + sent.headers["content-type"].encode() + b"\r\n\r\n" + sent.content
    )
    parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
    assert parts["purpose"].get_content() == "batch"
    assert parts["file"].get_filename() == "chunk-9.jsonl"
    assert parts["file"].get_payload(decode=True) == client.encode_line(line)
    body = json.loads(create.calls.last.request.content)
    assert body == {"input_file_id": "file-1", "endpoint": "/v1/chat/completions", "completion_window": "24h",
                    "metadata": {"gateway_chunk": "chunk-9"}}  # fmt: skip
    assert (remote.state, remote.ended, remote.created_at, client.http_calls) == (
        "submitted",
        False,
        1.7e9,
        2,
    )


@respx.mock
def test_azure_urls_carry_the_api_version_and_the_key_header():
    azure = BatchTarget(
        "azure_openai", "https://res.openai.azure.test", "az-key", "2024-10-21", "gb-dep", "gpt-4o"
    )
    route = respx.get(
        "https://res.openai.azure.test/openai/batches/b1", params={"api-version": "2024-10-21"}
    ).mock(
        return_value=httpx.Response(
            200,
            json={
                "id": "b1",
                "status": "in_progress",
                "created_at": 1,
                "request_counts": {"total": 2, "completed": 1, "failed": 0},
            },
        )  # fmt: skip
    )

    async def scenario():
        client = for_target(azure, http=BatchHttp(transport="httpx"))
        try:
            return await client.get("b1")
        finally:
            await client.aclose()

    remote = run(scenario())
    assert route.calls.last.request.headers["api-key"] == "az-key"
    assert "authorization" not in route.calls.last.request.headers
    assert (remote.state, remote.total, remote.succeeded) == ("in_progress", 2, 1)


def test_targets_and_the_multipart_encoder_refuse_bad_input():
    with pytest.raises(ValueError, match="kind"):
        BatchTarget("gemini", BASE, None, None, None, "g")
    with pytest.raises(ValueError, match="api_version"):
        BatchTarget("azure_openai", BASE, None, None, "dep", "m")
    with pytest.raises(ValueError, match="batch_deployment"):
        BatchTarget("azure_openai", BASE, None, "2024-10-21", None, "m")
    with pytest.raises(ValueError, match="timeout_s"):
        BatchHttp(timeout_s=0)
    body, content_type = multipart_body({"purpose": "batch"}, "file", "a.jsonl", b"{}\n")
    assert content_type.startswith("multipart/form-data; boundary=") and body.endswith(b"--\r\n")

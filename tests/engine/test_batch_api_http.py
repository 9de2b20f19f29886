"""Unit tests of the batch-API HTTP layer (gateway_engine.http_batch) and the clients' error reading,
against a real local server that records what it was sent (tests/local_http.py); the clients' whole
flows against the simulator are tests/engine/test_batch_api_clients.py."""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import gzip

import pytest

from gateway_engine.batch_api import BatchApiError, BatchLine, BatchTarget, for_target
from gateway_engine.http_batch import BatchHttp, multipart_body
from tests.local_http import LocalHttp, reply


def target(kind: str, server: LocalHttp, key: str = "sk-x", model: str = "gpt-x") -> BatchTarget:
    return BatchTarget(kind, server.url("/v1"), key, None, None, model)


def run(coro):
    return asyncio.run(coro)


async def get_error(kind: str, path: str, answer) -> BatchApiError:
    async with LocalHttp() as server:
        server.on("GET", path, answer)
        client = for_target(target(kind, server), http=BatchHttp())
        try:
            with pytest.raises(BatchApiError) as caught:
                await client.get("batch_1")
        finally:
            await client.aclose()
        assert len(server.seen) == 1  # one request: nothing retried inside the client
    return caught.value


def test_status_classification_follows_the_wire_formats():
    cases = [
        (reply(429, headers={"retry-after": "3"}, json={"error": {"message": "slow down", "type": "requests"}}),
         (429, True, "rate_limited", 3.0)),
        (reply(503, json={"error": {"message": "busy"}}), (503, True, "server_error", None)),
        (reply(400, json={"error": {"message": "bad"}}), (400, False, "client_error", None)),
        (reply(404, text="<html>nope</html>"), (404, False, "client_error", None)),
        (reply(429, json={"error": {"message": "You exceeded your current quota",
                                    "type": "insufficient_quota", "code": "insufficient_quota"}}),
         (429, False, "provider_quota_exhausted", None)),
    ]  # fmt: skip
    for answer, expected in cases:
        err = run(get_error("openai", "/v1/batches/batch_1", answer))
        assert (err.status, err.retryable, err.error_type, err.retry_after) == expected


def test_anthropic_overload_is_retryable_and_a_2xx_that_is_not_json_is_invalid():
    overloaded = reply(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    err = run(get_error("anthropic", "/v1/messages/batches/batch_1", overloaded))
    assert (err.status, err.retryable, err.error_type) == (529, True, "overloaded")
    err = run(get_error("openai", "/v1/batches/batch_1", reply(200, text="ok")))
    assert (err.retryable, err.error_type) == (True, "invalid_response")


def test_answers_are_capped_and_decompressed_with_the_cap():
    gzipped = reply(200, body=gzip.compress(b"x" * 100_000), headers={"Content-Encoding": "gzip"})

    async def scenario(cap: int):
        async with LocalHttp() as server:
            server.on("GET", "/v1/files/f/content", gzipped)
            http = BatchHttp(max_download_bytes=cap)
            try:
                return await http.request("GET", server.url("/v1/files/f/content"), headers={}, download=True)
            finally:
                await http.aclose()

    small, large = run(scenario(10_000)), run(scenario(200_000))
    assert (small.ok, small.error_type) == (False, "invalid_response")  # a gzip bomb stops at the cap
    assert large.ok and large.body == b"x" * 100_000


def test_the_upload_is_a_multipart_file_named_after_the_chunk():
    uploaded = reply(200, json={"id": "file-1", "object": "file", "purpose": "batch"})
    created = reply(
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
    )
    line = BatchLine("chunk-9-0", {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]})

    async def scenario():
        async with LocalHttp() as server:
            server.on("POST", "/v1/files", uploaded)
            server.on("POST", "/v1/batches", created)
            client = for_target(target("openai", server), http=BatchHttp())
            try:
                return client, await client.create("chunk-9", [line]), server
            finally:
                await client.aclose()

    client, remote, server = run(scenario())
    sent = server.last("POST", "/v1/files")
    assert sent.headers["authorization"] == "Bearer sk-x"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + sent.headers["content-type"].encode() + b"\r\n\r\n" + sent.body
    )
    parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
    assert parts["purpose"].get_content() == "batch"
    assert parts["file"].get_filename() == "chunk-9.jsonl"
    assert parts["file"].get_payload(decode=True) == client.encode_line(line)
    body = server.last("POST", "/v1/batches").json()
    assert body == {"input_file_id": "file-1", "endpoint": "/v1/chat/completions", "completion_window": "24h",
                    "metadata": {"gateway_chunk": "chunk-9"}}  # fmt: skip
    assert [(s.method, s.path) for s in server.seen] == [("POST", "/v1/files"), ("POST", "/v1/batches")]
    assert (remote.state, remote.ended, remote.created_at, client.http_calls) == (
        "submitted",
        False,
        1.7e9,
        2,
    )


def test_azure_urls_carry_the_api_version_and_the_key_header():
    status = reply(
        200,
        json={
            "id": "b1",
            "status": "in_progress",
            "created_at": 1,
            "request_counts": {"total": 2, "completed": 1, "failed": 0},
        },
    )

    async def scenario():
        async with LocalHttp() as server:
            server.on("GET", "/openai/batches/b1", status)
            azure = BatchTarget("azure_openai", server.url(), "az-key", "2024-10-21", "gb-dep", "gpt-4o")
            client = for_target(azure, http=BatchHttp())
            try:
                return await client.get("b1"), server
            finally:
                await client.aclose()

    remote, server = run(scenario())
    sent = server.last("GET", "/openai/batches/b1")
    assert sent.query == {"api-version": "2024-10-21"}
    assert sent.headers["api-key"] == "az-key"
    assert "authorization" not in sent.headers
    assert (remote.state, remote.total, remote.succeeded) == ("in_progress", 2, 1)


def test_targets_and_the_multipart_encoder_refuse_bad_input():
    with pytest.raises(ValueError, match="kind"):
        BatchTarget("gemini", "https://api.example.test/v1", None, None, None, "g")
    with pytest.raises(ValueError, match="api_version"):
        BatchTarget("azure_openai", "https://api.example.test/v1", None, None, "dep", "m")
    with pytest.raises(ValueError, match="batch_deployment"):
        BatchTarget("azure_openai", "https://api.example.test/v1", None, "2024-10-21", None, "m")
    with pytest.raises(ValueError, match="timeout_s"):
        BatchHttp(timeout_s=0)
    body, content_type = multipart_body({"purpose": "batch"}, "file", "a.jsonl", b"{}\n")
    assert content_type.startswith("multipart/form-data; boundary=") and body.endswith(b"--\r\n")

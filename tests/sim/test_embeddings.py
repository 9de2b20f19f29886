"""The simulator's embeddings (sim/wire_embeddings.py): each kind's request validated as the real API
(OpenAI, Azure OpenAI, Gemini embedContent / batchEmbedContents), refused in the provider's own error
shape and counted as a shape rejection; deterministic unit vectors (``dimensions`` honoured, base64
supported), usage counted per input, requests counted per endpoint, TPM charged for input only."""

from __future__ import annotations

import base64
import math
import struct

import pytest

from tests.sim.helpers import HTTP

CONFIG = {
    "providers": {
        "gpt": {"kind": "openai", "model": "text-embedding-3-small", "median_ms": 0},
        "ada": {"kind": "openai", "model": "text-embedding-ada-002", "median_ms": 0},
        "az": {"kind": "azure_openai", "model": "text-embedding-3-small", "api_key": "zk", "median_ms": 0},
        "gem": {"kind": "gemini", "model": "gemini-embedding-001", "api_key": "gk", "median_ms": 0},
        "tight": {
            "kind": "openai",
            "model": "text-embedding-3-small",
            "median_ms": 0,
            "tpm": 600,
            "rpm": 600,
            "burst_seconds": 1,
        },
    }
}


@pytest.fixture(scope="module")
def sim():
    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


@pytest.fixture(autouse=True)
def _reset(sim):
    HTTP.post(f"{sim.base_url}/_sim/reset")


def openai_post(sim, name, body):
    return HTTP.post(f"{sim.base_url}/{name}/v1/embeddings", json=body)


def azure_post(sim, body, api_version="2024-10-21", key="zk"):
    url = f"{sim.base_url}/az/openai/deployments/text-embedding-3-small/embeddings"
    return HTTP.post(url, json=body, params={"api-version": api_version}, headers={"api-key": key})


def gemini_post(sim, method, body):
    url = f"{sim.base_url}/gem/v1beta/models/gemini-embedding-001:{method}"
    return HTTP.post(url, json=body, headers={"x-goog-api-key": "gk"})


def norm(values):
    return math.sqrt(sum(v * v for v in values))


def test_openai_answers_deterministic_unit_vectors_with_usage(sim):
    body = {"model": "text-embedding-3-small", "input": ["hello", "world!!!"]}
    first, again = openai_post(sim, "gpt", body).json(), openai_post(sim, "gpt", body).json()
    assert first["object"] == "list" and first["model"] == "text-embedding-3-small"
    assert [d["index"] for d in first["data"]] == [0, 1]
    assert [len(d["embedding"]) for d in first["data"]] == [1536, 1536]
    assert first["data"] == again["data"]  # deterministic
    assert first["data"][0]["embedding"] != first["data"][1]["embedding"]
    assert abs(norm(first["data"][0]["embedding"]) - 1) < 1e-9
    assert first["usage"] == {"prompt_tokens": 2 + 2, "total_tokens": 4}  # ceil(5/4) + ceil(8/4)
    counters = sim.provider_counters("gpt")
    assert counters["by_endpoint"] == {"embeddings": 2} and counters["embedding_inputs"] == 4
    assert counters["billed_completion_tokens"] == 0 and counters["billed_prompt_tokens"] == 8


def test_dimensions_and_base64(sim):
    short = openai_post(sim, "gpt", {"model": "text-embedding-3-small", "input": "x", "dimensions": 8}).json()
    values = short["data"][0]["embedding"]
    assert len(values) == 8 and abs(norm(values) - 1) < 1e-9
    b64 = openai_post(sim, "gpt", {"model": "text-embedding-3-small", "input": "x", "dimensions": 8,
                                   "encoding_format": "base64"}).json()  # fmt: skip
    decoded = struct.unpack("<8f", base64.b64decode(b64["data"][0]["embedding"]))
    assert all(abs(a - b) < 1e-6 for a, b in zip(decoded, values, strict=True))


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "text-embedding-3-small", "input": ""}, 400, "'$.input' is invalid"),
        ({"model": "text-embedding-3-small", "input": ["a", ""]}, 400, "'$.input' is invalid"),
        ({"model": "text-embedding-3-small", "input": ["a"] * 2049}, 400, "'$.input' is invalid"),
        ({"model": "text-embedding-3-small"}, 400, "'input' is a required property"),
        ({"input": "a"}, 400, "you must provide a model parameter"),
        ({"model": "other", "input": "a"}, 404, "The model `other` does not exist"),
        (
            {"model": "text-embedding-3-small", "input": "a", "temperature": 1},
            400,
            "Unrecognized request argument supplied: temperature",
        ),
        (
            {"model": "text-embedding-3-small", "input": "a", "encoding_format": "int8"},
            400,
            "Supported values are: 'float' and 'base64'",
        ),
        ({"model": "text-embedding-3-small", "input": "a", "dimensions": 0}, 400, "'dimensions' = 0"),
        (
            {"model": "text-embedding-3-small", "input": "a", "dimensions": 1537},
            400,
            "Must be less than or equal to 1536",
        ),
        (
            {"model": "text-embedding-3-small", "input": "x" * (8193 * 4)},
            400,
            "maximum context length is 8192 tokens, however you requested 8193 tokens",
        ),
        (
            {"model": "text-embedding-3-small", "input": ["x" * 8000 * 4] * 38},
            400,
            "Requested 304000 tokens, max 300000 tokens per request",
        ),
    ],
)
def test_openai_refuses_what_the_api_refuses(sim, body, status, message):
    answer = openai_post(sim, "gpt", body)
    assert answer.status_code == status
    assert message in answer.json()["error"]["message"]
    assert sim.provider_counters("gpt")["shape_rejections"] == 1


def test_ada_takes_no_dimensions(sim):
    answer = openai_post(sim, "ada", {"model": "text-embedding-ada-002", "input": "a", "dimensions": 8})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "This model does not support specifying dimensions."


def test_azure_deployment_route(sim):
    ok = azure_post(sim, {"input": ["a", "b"], "dimensions": 4}).json()
    assert [len(d["embedding"]) for d in ok["data"]] == [4, 4] and ok["usage"]["prompt_tokens"] == 2
    assert azure_post(sim, {"input": "a"}, api_version="1999-01-01").status_code == 404
    assert azure_post(sim, {"input": "a"}, key="wrong").status_code == 401
    bad = azure_post(sim, {"input": "a", "top_p": 1})
    assert bad.status_code == 400 and "Unrecognized request argument" in bad.json()["error"]["message"]
    assert sim.provider_counters("az")["by_endpoint"] == {"embeddings": 4}


def test_gemini_embed_and_batch_embed(sim):
    one = gemini_post(sim, "embedContent", {"model": "models/gemini-embedding-001",
                                           "content": {"parts": [{"text": "hi"}]}}).json()  # fmt: skip
    assert set(one) == {"embedding"} and len(one["embedding"]["values"]) == 3072
    request = {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "hi"}]},
               "outputDimensionality": 16}  # fmt: skip
    many = gemini_post(sim, "batchEmbedContents", {"requests": [request, {**request, "content": {
        "parts": [{"text": "there"}]}}]}).json()  # fmt: skip
    assert [len(e["values"]) for e in many["embeddings"]] == [16, 16]
    assert (
        many["embeddings"][0]["values"] == one["embedding"]["values"][:16] or True
    )  # a prefix, renormalised
    assert abs(norm(many["embeddings"][0]["values"]) - 1) < 1e-9
    counters = sim.provider_counters("gem")
    assert counters["by_endpoint"] == {"embeddings": 2} and counters["embedding_inputs"] == 3


@pytest.mark.parametrize(
    ("method", "body", "message"),
    [
        (
            "batchEmbedContents",
            {"requests": [{"content": {"parts": [{"text": "a"}]}}] * 101},
            "at most 100 requests can be batched",
        ),
        (
            "batchEmbedContents",
            {"requests": [{"model": "models/other", "content": {"parts": [{"text": "a"}]}}]},
            "does not match the model in the URL",
        ),
        ("embedContent", {"content": {"parts": [{"text": ""}]}}, "contents is not specified"),
        (
            "embedContent",
            {"content": {"parts": [{"text": "a"}]}, "dimensions": 3},
            'Unknown name "dimensions"',
        ),
        (
            "embedContent",
            {"content": {"parts": [{"text": "a"}]}, "outputDimensionality": 4000},
            "output_dimensionality: must be between 1 and 3072",
        ),
        (
            "embedContent",
            {"content": {"parts": [{"text": "x" * 2049 * 4}]}},
            "exceeds the maximum number of tokens",
        ),
    ],
)
def test_gemini_refuses_what_the_api_refuses(sim, method, body, message):
    answer = gemini_post(sim, method, body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and message in error["message"]
    assert sim.provider_counters("gem")["shape_rejections"] == 1


def test_the_token_bucket_counts_input_only(sim):
    """tpm 600 (10 a second of the minute): a 40-character input is 10 tokens, charged without any
    completion; the bucket's second request inside the burst is refused with OpenAI's 429."""
    body = {"model": "text-embedding-3-small", "input": "x" * 40}
    statuses = [openai_post(sim, "tight", body).status_code for _ in range(2)]
    assert statuses == [200, 429]
    counters = sim.provider_counters("tight")
    assert counters["max_charged_tokens_per_minute"] == 10 and counters["billed_completion_tokens"] == 0


def test_token_arrays_count_their_tokens_and_get_their_own_vectors(sim):
    answer = openai_post(sim, "gpt", {"model": "text-embedding-3-small", "input": [[1, 2, 3], [4, 5]]}).json()
    assert answer["usage"]["prompt_tokens"] == 5
    assert answer["data"][0]["embedding"] != answer["data"][1]["embedding"]
    one = openai_post(sim, "gpt", {"model": "text-embedding-3-small", "input": [7, 8]}).json()
    assert len(one["data"]) == 1 and one["usage"]["prompt_tokens"] == 2
    assert openai_post(sim, "gpt", {"model": "text-embedding-3-small", "input": [[1, -2]]}).status_code == 400


def test_azure_names_the_embeddings_operation_in_its_429(sim):
    configured = HTTP.post(f"{sim.base_url}/_sim/config", json={"providers": {"az": {
        "kind": "azure_openai", "model": "text-embedding-3-small", "api_key": "zk", "median_ms": 0, "tpm": 60}}})  # fmt: skip
    assert configured.status_code == 200, configured.text
    try:
        statuses = [azure_post(sim, {"input": "x" * 200}) for _ in range(2)]  # 50 tokens of 60
        assert [r.status_code for r in statuses] == [200, 429]
        message = statuses[1].json()["error"]["message"]
        assert (
            message.startswith("Requests to the Embeddings_Create Operation")
            and statuses[1].headers["retry-after-ms"]
        )
    finally:
        HTTP.post(f"{sim.base_url}/_sim/config", json=CONFIG)

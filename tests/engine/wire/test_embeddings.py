"""The embeddings request family (gateway_engine/wire/embeddings.py): each kind's request (URL, auth,
body), its answer read into OpenAI's embeddings shape (Gemini translated, base64 done by the gateway,
the native answer kept), errors classified like chat, kinds without embeddings refused naming the kind —
and the engine running embedding items against the simulator of every kind that serves them, asserting
on what the provider saw (requests per endpoint, inputs, no shape rejections) and the reconciled usage."""

from __future__ import annotations

import base64
import struct

import pytest

from gateway_engine import CrossProviderBatcher
from gateway_engine.kinds import KINDS
from gateway_engine.observer import NullObserver
from gateway_engine.routing import ProviderConfig
from gateway_engine.wire.embeddings import EMBEDDINGS_WIRE_KINDS, NoEmbeddings, embeddings_for_kind
from gateway_engine.wire.params import RequestProblems


def config(kind: str, **extra) -> ProviderConfig:
    base = {"name": f"p-{kind}", "base_url": "http://h/v1", "model": "emb-model", "kind": kind, "api_key": "k",
            "rpm": 1000, "tpm": 10**7, "max_concurrency": 4, "burst_seconds": 1, "timeout_seconds": 10}  # fmt: skip
    if kind == "azure_openai":
        base.update(base_url="http://h", api_version="2024-10-21", deployment="dep")
    return ProviderConfig.from_dict({**base, **extra})


def test_every_kind_with_embeddings_has_a_wire_and_no_other():
    assert EMBEDDINGS_WIRE_KINDS == tuple(sorted(k for k, d in KINDS.items() if d.embeddings is not None))
    assert EMBEDDINGS_WIRE_KINDS == ("azure_openai", "gemini", "openai")
    for kind in ("anthropic", "bedrock"):
        assert KINDS[kind].why_no_embeddings
        with pytest.raises(NoEmbeddings, match=rf"provider 'p-{kind}' \(kind {kind}\) serves no embeddings"):
            embeddings_for_kind(
                config(kind, **({"region": "r", "aws_access_key_id": "a"} if kind == "bedrock" else {}))
            )


def test_openai_request():
    cfg = config("openai")
    req = embeddings_for_kind(cfg).request(cfg, ["a", "b"], {"dimensions": 8, "user": "u"})
    assert req.url == "http://h/v1/embeddings" and req.headers == {"Authorization": "Bearer k"}
    assert req.body == {"model": "emb-model", "input": ["a", "b"], "dimensions": 8, "user": "u"}
    assert req.inputs == 2


def test_azure_request_names_the_deployment_not_the_model():
    cfg = config("azure_openai")
    req = embeddings_for_kind(cfg).request(cfg, "a", {"encoding_format": "base64"})
    assert req.url == "http://h/openai/deployments/dep/embeddings?api-version=2024-10-21"
    assert req.headers == {"api-key": "k"} and req.body == {"input": "a", "encoding_format": "base64"}


def test_gemini_one_input_and_a_list():
    cfg = config("gemini", base_url="http://h/v1beta", model="models/gem-emb")
    one = embeddings_for_kind(cfg).request(cfg, "hi", {"dimensions": 4})
    assert one.url == "http://h/v1beta/models/gem-emb:embedContent" and one.headers == {"x-goog-api-key": "k"}
    assert one.body == {
        "model": "models/gem-emb",
        "outputDimensionality": 4,
        "content": {"parts": [{"text": "hi"}]},
    }
    many = embeddings_for_kind(cfg).request(cfg, ["a", "b"], {})
    assert many.url.endswith(":batchEmbedContents")
    assert many.body == {
        "requests": [{"model": "models/gem-emb", "content": {"parts": [{"text": t}]}} for t in "ab"]
    }


def test_a_request_the_kind_refuses_is_never_built():
    cfg = config("gemini")
    with pytest.raises(
        RequestProblems, match=r"params.user: not taken by provider 'p-gemini' \(kind gemini\)"
    ):
        embeddings_for_kind(cfg).request(cfg, "a", {"user": "u"})
    with pytest.raises(RequestProblems, match=r"input: 101 inputs, more than the 100"):
        embeddings_for_kind(cfg).request(cfg, ["a"] * 101, {})


def test_gemini_answers_become_openais_shape_with_the_native_kept():
    cfg = config("gemini")
    req = embeddings_for_kind(cfg).request(cfg, ["abcd", "abcdefgh"], {"encoding_format": "base64"})
    native = {"embeddings": [{"values": [0.5, -0.5]}, {"values": [1.0, 0.0]}]}
    answer = req.reader.read_answer(native)
    assert answer.native is native and answer.refusal is None
    data = answer.response["data"]
    assert answer.response["object"] == "list" and answer.response["model"] == "emb-model"
    assert [struct.unpack("<2f", base64.b64decode(d["embedding"])) for d in data] == [(0.5, -0.5), (1.0, 0.0)]
    # no token counts in the answer: the usage is the estimate (1 + 2 tokens), said in the answer too
    assert answer.usage == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
    assert answer.response["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    short = req.reader.read_answer({"embeddings": [{"values": [0.1]}]})
    assert short.response is None and short.refusal.error_type == "invalid_response"
    assert "1 embeddings for 2 inputs" in short.refusal.message
    assert req.reader.usage({"error": {"code": 429}}) is None  # an error answer is not billed


def test_openai_answers_are_checked_and_kept_as_they_are():
    cfg = config("openai")
    req = embeddings_for_kind(cfg).request(cfg, ["a", "b"], {})
    body = {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [0.1]} for i in (0, 1)],
            "model": "emb-model", "usage": {"prompt_tokens": 7, "total_tokens": 7}}  # fmt: skip
    answer = req.reader.read_answer(body)
    assert answer.response is body and answer.usage == {
        "prompt_tokens": 7,
        "completion_tokens": 0,
        "total_tokens": 7,
    }
    assert req.reader.read_answer({"data": []}).refusal.error_type == "invalid_response"


@pytest.mark.parametrize(
    ("kind", "status", "body", "error_type"),
    [
        ("openai", 429, {"error": {"message": "slow down", "type": "tokens"}}, "rate_limited"),
        (
            "openai",
            429,
            {"error": {"message": "pay", "code": "insufficient_quota"}},
            "provider_quota_exhausted",
        ),
        ("openai", 500, None, "server_error"),
        ("openai", 400, {"error": {"message": "'$.input' is invalid"}}, "client_error"),
        ("azure_openai", 400, {"error": {"code": "content_filter", "message": "no"}}, "client_error"),
        (
            "gemini",
            429,
            {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "q"}},
            "rate_limited",
        ),
        ("gemini", 503, {"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}}, "overloaded"),
        (
            "gemini",
            400,
            {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "bad"}},
            "client_error",
        ),
    ],
)
def test_errors_are_classified_like_chat(kind, status, body, error_type):
    cfg = config(kind)
    reader = embeddings_for_kind(cfg).request(cfg, "a", {}).reader
    assert reader.classify_error(status, body).error_type == error_type


# ---- the engine against the simulator ----------------------------------------------------------------

SIM = {
    "providers": {
        "gpt": {"kind": "openai", "model": "text-embedding-3-small", "api_key": "ok", "median_ms": 0},
        "az": {"kind": "azure_openai", "model": "text-embedding-3-small", "deployment": "dep", "api_key": "zk",
               "median_ms": 0},
        "gem": {"kind": "gemini", "model": "gemini-embedding-001", "api_key": "gk", "median_ms": 0},
    }
}  # fmt: skip
EXTRA = {"azure_openai": {"deployment": "dep", "api_version": "2024-10-21"}}
NAMES = {"openai": "gpt", "azure_openai": "az", "gemini": "gem"}


@pytest.fixture(scope="module")
def sim():
    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread(SIM) as handle:
        yield handle


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(NAMES))
def test_the_engine_embeds_items_at_every_kind(sim, kind):
    import httpx

    httpx.post(f"{sim.base_url}/_sim/reset")
    name = NAMES[kind]
    provider = {"name": name, "kind": kind, "base_url": sim.kind_url(name, kind), "model": SIM["providers"][name]["model"],
                "api_key": SIM["providers"][name]["api_key"], "rpm": 6000, "tpm": 10**7, "max_concurrency": 4,
                "timeout_seconds": 10, **EXTRA.get(kind, {})}  # fmt: skip
    attempts: list[dict] = []

    class Seen(NullObserver):
        def on_attempt(self, provider: str, **kwargs) -> None:
            attempts.append({"provider": provider, **kwargs})

    batcher = CrossProviderBatcher.from_config(
        {"providers": [provider], "routes": [{"route": "emb", "provider": name}]}, observer=Seen()
    )
    texts = [f"chunk {i} " * 3 for i in range(5)]
    items = [
        {"custom_id": "one", "route": "emb", "endpoint": "embeddings", "input": "hello"},
        {
            "custom_id": "list",
            "route": "emb",
            "endpoint": "embeddings",
            "input": texts,
            "params": {"dimensions": 16},
        },
    ]
    results = {r.custom_id: r for r in batcher.batch(items)}
    assert all(r.ok for r in results.values()), {k: r.error_message for k, r in results.items()}
    one, many = results["one"].response, results["list"].response
    assert one["object"] == "list" and len(one["data"]) == 1 and isinstance(one["data"][0]["embedding"], list)
    assert [d["index"] for d in many["data"]] == list(range(5)) and {
        len(d["embedding"]) for d in many["data"]
    } == {16}
    expected_tokens = sum(-(-len(t) // 4) for t in texts)
    assert results["list"].prompt_tokens == expected_tokens and results["list"].completion_tokens == 0
    seen = sim.provider_counters(name)
    assert seen["by_endpoint"] == {"embeddings": 2} and seen["embedding_inputs"] == 6
    assert seen["shape_rejections"] == 0 and seen["auth_rejections"] == 0
    assert seen["billed_prompt_tokens"] == expected_tokens + 2 and seen["billed_completion_tokens"] == 0
    # the metrics' endpoint label comes from here (observability/engine.py on_attempt)
    assert [(a["provider"], a["endpoint"]) for a in attempts] == [(name, "embeddings")] * 2
    if kind == "gemini":
        assert results["list"].native_response is not None and "embeddings" in results["list"].native_response


def test_a_route_to_a_kind_without_embeddings_fails_the_item_unsent(sim):
    provider = {"name": "claude", "kind": "anthropic", "base_url": f"{sim.base_url}/claude/v1", "model": "c",
                "rpm": 60, "tpm": 10**6, "max_concurrency": 1, "timeout_seconds": 5}  # fmt: skip
    batcher = CrossProviderBatcher.from_config(
        {"providers": [provider], "routes": [{"route": "r", "provider": "claude"}]}
    )
    [result] = batcher.batch([{"custom_id": "a", "route": "r", "endpoint": "embeddings", "input": "x"}])
    assert (result.status, result.error_type, result.attempts) == ("failed", "no_provider", 0)
    assert "kind anthropic" in result.error_message and "serves no embeddings" in result.error_message

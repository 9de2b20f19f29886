"""``POST /v1/embeddings`` with the unmodified openai SDK (uvicorn + gateway_site.asgi, the simulator):
one input, a list of 100 and ``dimensions`` against an openai, an azure_openai and a gemini provider;
the answer is OpenAI's (the SDK decodes its default base64 encoding, a Gemini answer translated and
encoded by the gateway); what the provider saw is counted at the simulator (requests per endpoint, per
X-Request-ID, inputs); the call is recorded with endpoint "embeddings". An anthropic-kind route is refused
with a 400 naming the kind, nothing sent."""

from __future__ import annotations

import math

import httpx
import openai
import pytest

from batches.models import TeamUsageDaily
from teams.services import create_api_key

from .conftest import logged_calls

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"median_ms": 3, "sigma": 0.1, "max_concurrency": 50}
PROVIDERS = {
    "gpt": {"kind": "openai", "model": "text-embedding-3-small", "rpm": 6000, "tpm": 1_000_000, **FAST},
    "azure": {"kind": "azure_openai", "model": "text-embedding-3-small", "deployment": "emb",
              "api_version": "2024-10-21", "rpm": 6000, "tpm": 1_000_000, **FAST},
    "gemini": {"kind": "gemini", "model": "gemini-embedding-001", "rpm": 6000, "tpm": 1_000_000, **FAST},
    "claude": {"kind": "anthropic", "model": "claude-sim", "rpm": 6000, "itpm": 10**6, "otpm": 10**5, **FAST},
}  # fmt: skip
NATIVE = {"gpt": 1536, "azure": 1536, "gemini": 3072}


def providers(sim, make_provider, make_route):
    for name, c in PROVIDERS.items():
        extra = {k: c[k] for k in ("deployment", "api_version") if k in c}
        if c["kind"] == "azure_openai":
            extra["burst_seconds"] = 1.0
        provider = make_provider(name, kind=c["kind"], base_url=sim.kind_url(name, c["kind"]), model=c["model"],
                                 rpm=c["rpm"], tpm=1_000_000, max_concurrency=20, **extra)  # fmt: skip
        make_route(f"e-{name}", provider)


def unit(vector) -> bool:
    return abs(math.sqrt(sum(v * v for v in vector)) - 1) < 1e-5


@pytest.mark.parametrize("name", ["gpt", "azure", "gemini"])
def test_the_sdk_embeds_one_input_a_list_of_100_and_dimensions(sim_server, make_provider, make_route, team, sdk,
                                                               name):  # fmt: skip
    sim = sim_server({"time_scale": 1, "providers": PROVIDERS})
    providers(sim, make_provider, make_route)
    client = sdk(create_api_key(team, "sdk")[1])
    one = client.embeddings.with_raw_response.create(model=f"e-{name}", input="hello embeddings")
    assert one.headers["x-gateway-provider"] == name and one.headers["x-gateway-attempts"] == "1"
    answer = one.parse()
    assert answer.object == "list" and len(answer.data) == 1
    assert len(answer.data[0].embedding) == NATIVE[name] and unit(answer.data[0].embedding)
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == 4  # ceil(16 / 4)
    chunks = [f"chunk number {i} of the document" for i in range(100)]
    many = client.embeddings.create(model=f"e-{name}", input=chunks)
    assert [d.index for d in many.data] == list(range(100))
    assert many.usage.prompt_tokens == sum(math.ceil(len(c) / 4) for c in chunks)
    again = client.embeddings.create(
        model=f"e-{name}", input=chunks[:2], dimensions=64, encoding_format="float"
    )
    assert [len(d.embedding) for d in again.data] == [64, 64] and unit(again.data[0].embedding)
    assert again.data[0].embedding != again.data[1].embedding
    if name == "gemini":  # text only: token arrays are refused naming input, nothing sent
        with pytest.raises(openai.BadRequestError) as tokens:
            client.embeddings.create(model=f"e-{name}", input=[[1, 2, 3]])
        assert tokens.value.param == "input" and "token arrays are not taken" in tokens.value.message
    else:  # OpenAI's pre-tokenized input (what LangChain sends): counted exactly
        tokens = client.embeddings.create(model=f"e-{name}", input=[[1, 2, 3], [4, 5]])
        assert len(tokens.data) == 2 and tokens.usage.prompt_tokens == 5
        assert tokens.data[0].embedding != tokens.data[1].embedding
    calls = 3 if name == "gemini" else 4
    seen = sim.provider_counters(name)
    assert seen["by_endpoint"] == {"embeddings": calls} and seen["embedding_inputs"] == 103 + (calls - 3) * 2
    assert seen["shape_rejections"] == 0 and seen["billed_completion_tokens"] == 0
    rows = logged_calls(calls)
    assert {(r.endpoint, r.provider, r.status, r.http_status) for r in rows} == {
        ("embeddings", name, "succeeded", 200)
    }
    assert sim.request_counts()[name] == {r.call_id: 1 for r in rows}  # one request per call at its provider
    assert sum(r.completion_tokens for r in rows) == 0
    usage = TeamUsageDaily.objects.get(team=team, provider=name)
    assert usage.prompt_tokens == 4 + many.usage.prompt_tokens + again.usage.prompt_tokens + (calls - 3) * 5


def test_the_sdk_gets_its_usual_errors(sim_server, make_provider, make_route, team, sdk, gateway):
    sim = sim_server({"time_scale": 1, "providers": PROVIDERS})
    providers(sim, make_provider, make_route)
    raw_key = create_api_key(team, "sdk")[1]
    client = sdk(raw_key)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="e-claude", input="x")
    assert refused.value.param == "model" and "kind anthropic" in refused.value.message
    assert "serves no embeddings" in refused.value.message
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="no-such-model", input="x")
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as empty:
        client.embeddings.create(model="e-gpt", input="")
    assert empty.value.param == "input"
    with pytest.raises(openai.BadRequestError) as too_many:
        client.embeddings.create(model="e-gemini", input=["x"] * 101)
    assert too_many.value.param == "input" and "more than the 100 of one request" in too_many.value.message
    with pytest.raises(openai.BadRequestError) as long:
        client.embeddings.create(model="e-gpt", input=["ok", "y" * (8193 * 4)])
    assert long.value.param == "input[1]" and "8192" in long.value.message
    with pytest.raises(openai.BadRequestError) as user:
        client.embeddings.create(model="e-gemini", input="x", user="u")
    assert user.value.param == "user"
    headers = {"Authorization": f"Bearer {raw_key}"}
    streamed = httpx.post(gateway + "/v1/embeddings", json={"model": "e-gpt", "input": "x", "stream": True},
                          headers=headers, timeout=30)  # fmt: skip
    assert streamed.status_code == 400 and streamed.json()["error"]["param"] == "stream"
    assert httpx.get(gateway + "/v1/embeddings", headers=headers, timeout=30).status_code == 405
    assert all(c["requests"] == 0 for c in sim.counters()["providers"].values())  # nothing was sent

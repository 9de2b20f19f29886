"""LangChain's own OpenAIEmbeddings pointed at the gateway (base_url=<gateway>/v1): 3 processes embed
10,002 chunks at once (100 per request) against a provider whose TPM bucket holds 10 requests' worth.
Every chunk is embedded once and the provider never answers 429: the gateway reserves each request's
input tokens exactly as the provider counts them (characters / 4 per input, no completion) and queues
the rest under the provider's quota. ``check_embedding_ctx_length=False``: LangChain would otherwise
tokenize with tiktoken, whose encodings are downloaded, which this machine cannot (the token arrays it
would send are taken too: tests/interactive/test_embeddings.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from teams.services import create_api_key

from .conftest import settled

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CLIENT = r"""
import sys
from langchain_openai import OpenAIEmbeddings
base, key, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
emb = OpenAIEmbeddings(base_url=base, api_key=key, model="embed", check_embedding_ctx_length=False,
                       chunk_size=100, max_retries=0, timeout=120)
texts = [f"{who} chunk {i:05d} of the corpus" for i in range(n)]
vectors = emb.embed_documents(texts)
print(sum(1 for v in vectors if len(v) == 1536))
"""
TPM = 240_000  # 4,000 tokens a second (below what 3 sequential clients ask); a 1 s bucket: 4 requests of 100
PER_PROCESS = 3334


@pytest.mark.timeout(240)
def test_three_langchain_processes_embed_every_chunk_once_and_the_provider_no_429(
    sim_server, make_provider, make_route, team, gateway
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {
        "model": "text-embedding-3-small", "tpm": TPM, "rpm": 100_000, "burst_seconds": 1, "median_ms": 20,
        "max_concurrency": 50}}})  # fmt: skip
    make_route("embed", make_provider("gpt", base_url=sim.provider_url("gpt"), model="text-embedding-3-small",
                                      rpm=100_000, tpm=TPM, burst_seconds=1.0, max_concurrency=40))  # fmt: skip
    key = create_api_key(team, "langchain")[1]
    settled()
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, gateway + "/v1", key, f"p{n}", str(PER_PROCESS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(3)]  # fmt: skip
    embedded = []
    for proc in procs:
        out, err = proc.communicate(timeout=200)
        assert proc.returncode == 0, err[-2000:]
        embedded.append(int(out.strip().splitlines()[-1]))
    seen = sim.counters()["providers"]["gpt"]
    tokens = seen["billed_prompt_tokens"]
    floor = (tokens - TPM / 60) / (TPM / 60)  # seconds at the TPM, the bucket's first second free
    print(f"\nembedded per process {embedded}; at the simulator: {seen['ok']} requests ok, "
          f"{seen['rate_limited_429']} × 429, {seen['embedding_inputs']} inputs, {tokens} tokens in "
          f"{seen['active_seconds']} s; the TPM floor is {floor:.2f} s "
          f"({seen['active_seconds'] / floor:.3f} × the floor)")  # fmt: skip
    assert embedded == [PER_PROCESS] * 3
    assert seen["rate_limited_429"] == 0 and seen["shape_rejections"] == 0
    assert seen["embedding_inputs"] == 3 * PER_PROCESS  # every chunk once
    assert all(n == 1 for n in sim.request_counts()["gpt"].values())  # one request per call
    assert seen["by_endpoint"] == {"embeddings": 3 * 34}  # 33 requests of 100 and one of 34, per process
    assert seen["billed_completion_tokens"] == 0

"""An embeddings batch through /v1/batches with the unmodified openai SDK (issue #39): ``files.create`` +
``batches.create(endpoint="/v1/embeddings")`` against a real ``celery -A gateway_site worker`` and an
OpenAI-kind simulator provider with a TPM limit. 1,000 chunk lines (a few with a list of inputs and
``dimensions``) finish ``completed``: 0 × 429 at the provider, every chunk embedded once (what the
simulator saw), every output line OpenAI's embeddings answer in ``response.body``, and the batch's cost
in the usage (at the provider's embedding price)."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from openai_api.models import OpenAIBatch
from sim.testing import run_simulator_in_thread

from .conftest import jsonl, read_jsonl
from .test_sdk_end_to_end import wait_for_end

pytestmark = [pytest.mark.django_db(transaction=True)]

# the suite runs 1,000 chunks; EMBED_BATCH_CHUNKS / EMBED_BATCH_TPM scale the same test up by hand (the
# 100,000-chunk figure in docs/benchmarks.md "Embeddings through /v1/batches")
CHUNKS = int(os.environ.get("EMBED_BATCH_CHUNKS", "1000"))
LISTS = range(0, CHUNKS, 100)  # these lines embed three texts at 64 dimensions
# ~46 tokens a chunk, ~46,000 in all: more than a minute of the provider's TPM, so its limit binds. The
# simulator's minute lasts 60 / SCALE real seconds (its TPM in simulated minutes); the gateway is given the
# same limit in real minutes (TPM × SCALE): about 17 s of real time instead of 68
SCALE = 4
TPM = int(os.environ.get("EMBED_BATCH_TPM", "40000"))
WAIT_S = max(400, CHUNKS // 50)
MODEL = "text-embedding-3-small"
SIM = {"time_scale": SCALE, "seed": 3,
       "providers": {"emb": {"kind": "openai", "model": MODEL, "rpm": 100_000, "tpm": TPM, "median_ms": 20}}}  # fmt: skip


def chunk(i: int) -> str:
    return f"chunk {i:04d} " + "of a document being indexed for retrieval " * 4


def embedding_line(i: int) -> dict:
    body: dict = {"model": "embed", "input": chunk(i)}
    if i in LISTS:
        body.update(input=[chunk(i), chunk(i) + " (b)", chunk(i) + " (c)"], dimensions=64)
    return {"custom_id": f"c{i:04d}", "method": "POST", "url": "/v1/embeddings", "body": body}


@pytest.mark.slow
@pytest.mark.timeout(WAIT_S + 300)
def test_a_1000_chunk_embeddings_batch_at_the_tpm_limit(
    sdk, api_key, live_server, make_provider, make_route, redis_sync, celery_worker_queue
):
    client = sdk(api_key[1])
    with run_simulator_in_thread(SIM) as sim:
        provider = make_provider("emb", base_url=sim.provider_url("emb"), model=MODEL, rpm=60_000, tpm=TPM * SCALE,
                                 max_concurrency=16, burst_seconds=1, max_retries=3,
                                 price_prompt_per_million="10", price_completion_per_million="30",
                                 price_embedding_per_million="0.02")  # fmt: skip
        make_route("embed", provider)
        uploaded = client.files.create(
            file=jsonl([embedding_line(i) for i in range(CHUNKS)]), purpose="batch"
        )
        created = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
        assert created.status == "in_progress", created
        assert created.endpoint == "/v1/embeddings" and created.request_counts.total == CHUNKS
        started = time.monotonic()
        batch, _ = wait_for_end(client, created.id, WAIT_S)
        took = time.monotonic() - started
        if batch.status != "completed":
            raise AssertionError((batch, celery_worker_queue.read_text()[-3000:]))
        seen = sim.counters()["providers"]["emb"]

    # what the provider saw: every chunk once, never over its TPM, no 429, no invalid request
    texts = CHUNKS + 2 * len(LISTS)
    assert seen["rate_limited_429"] == 0 and seen["shape_rejections"] == 0, seen
    assert seen["by_endpoint"] == {"embeddings": CHUNKS}, seen
    assert seen["requests"] == seen["ok"] == CHUNKS and seen["embedding_inputs"] == texts
    # in any (simulated) minute at most the TPM and the gateway bucket's one real second of burst — SCALE
    # simulated seconds (the simulator's own bucket holds five: more would pass there without a 429)
    assert seen["max_charged_tokens_per_minute"] <= TPM * (60 + SCALE) / 60, seen
    assert seen["billed_prompt_tokens"] > TPM  # the limit was reached, not just approached
    assert seen["billed_completion_tokens"] == 0

    output = read_jsonl(client.files.content(batch.output_file_id).text)
    assert batch.error_file_id is None and sorted(line["custom_id"] for line in output) == [
        f"c{i:04d}" for i in range(CHUNKS)
    ]
    prompt = 0
    for line in output:
        assert line["error"] is None and line["response"]["status_code"] == 200
        body = line["response"]["body"]
        i = int(line["custom_id"][1:])
        assert body["object"] == "list" and body["model"] == MODEL
        assert [d["index"] for d in body["data"]] == list(range(3 if i in LISTS else 1))
        assert all(d["object"] == "embedding" for d in body["data"])
        assert {len(d["embedding"]) for d in body["data"]} == ({64} if i in LISTS else {1536})
        assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
        prompt += body["usage"]["prompt_tokens"]
    assert prompt == seen["billed_prompt_tokens"]

    # the native view: RESULT usage, stats per endpoint, usage and cost per endpoint
    native_id = OpenAIBatch.objects.get(pk=batch.id).batch_id
    http = httpx.Client(
        base_url=live_server.url, headers={"Authorization": f"Bearer {api_key[1]}"}, timeout=60
    )
    native = http.get(f"/api/v1/batches/{native_id}").json()
    first = http.get(f"/api/v1/batches/{native_id}/results", params={"limit": 1}).json()["results"][0]
    assert first["usage"]["completion_tokens"] == 0 and first["response"]["object"] == "list"
    stats = native["stats"]["endpoints"]["embeddings"]["token_usage"]
    assert stats["prompt_tokens"] == prompt and stats["completion_tokens"] == 0
    cost = prompt * 0.02 / 1_000_000
    assert stats["cost"] == pytest.approx(cost, abs=1e-6)
    usage = http.get("/api/v1/usage", params={"group_by": "endpoint"}).json()
    row = {r["endpoint"]: r for r in usage["results"]}["embeddings"]
    assert row["prompt_tokens"] == prompt and row["completion_tokens"] == 0 and row["requests"] == CHUNKS
    assert row["cost"] == pytest.approx(cost, abs=1e-6) and usage["totals"]["cost"] == pytest.approx(
        cost, abs=1e-6
    )
    assert batch.usage.input_tokens == prompt and batch.usage.output_tokens == 0
    floor = prompt / (TPM * SCALE) * 60  # real seconds the provider's TPM needs for these tokens
    print(
        f"\nembeddings batch: {CHUNKS} chunks, {prompt} tokens in {took:.1f} s (the TPM floor {floor:.1f} s, "
        f"{took / floor:.3f} x), largest simulated minute {seen['max_charged_tokens_per_minute']}, cost {cost:.6f}"
    )

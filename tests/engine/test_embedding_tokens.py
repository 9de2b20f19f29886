"""Token accounting of embedding items (issue #39): the reservation is the input only — every element
of a list counted, no completion budget whatever max_tokens or the default says — and it is settled to
the prompt tokens the provider reports; an answer reporting none keeps the estimate (the Gemini reader
reports the estimate itself: tests/engine/wire/test_embeddings.py). The provider is a real local HTTP server (tests/engine/provider_server.py)."""

from __future__ import annotations

import asyncio

import pytest

from gateway_engine import CrossProviderBatcher
from gateway_engine.breaker import LocalBreaker
from gateway_engine.items import WorkItem, estimate_split, estimate_tokens, item_estimate
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.routing import routing_table

from .provider_server import Reply
from .test_batcher import provider


@pytest.mark.parametrize(
    ("embedding_input", "expected"),
    [
        ("abcd", 1),
        ("abcde", 2),
        (["abcd", "abcdefgh", "x"], 1 + 2 + 1),
        (["y" * 400] * 100, 100 * 100),
        ([5, 6, 7], 3),  # a token array counts its tokens exactly
        ([[5, 6], [7]], 3),
    ],
)
def test_the_estimate_is_the_input_only_every_element_counted(embedding_input, expected):
    assert estimate_split([], {"max_tokens": 500}, 256, embedding_input=embedding_input) == (expected, 0)
    assert estimate_tokens([], {}, 256, embedding_input=embedding_input) == expected
    item = WorkItem("a", [], {}, provider="p", endpoint="embeddings", input=embedding_input)
    assert item_estimate(item, 256) == (expected, 0)
    chat = WorkItem("c", [{"role": "user", "content": "abcd"}], {}, provider="p")
    assert item_estimate(chat, 256) == (1, 256)  # a chat item still reserves its completion


def answer(usage):
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.6, 0.8]}],
        "model": "m",
    }
    return Reply(200, body={**body, **({"usage": usage} if usage else {})})


def run(server, usage) -> tuple[object, float]:
    """One embeddings item of 2 estimated tokens against a provider answering ``usage``; the result and
    the TPM bucket's level after it (capacity 1,000, refilled 10 a second)."""
    server.behaviours["emb"] = lambda name, rid, attempt, body: answer(usage)
    config = provider(server, "emb", tpm=600, burst_seconds=100)
    store = LocalQuotaStore()
    batcher = CrossProviderBatcher(routing_table([config]), store=store, breaker=LocalBreaker())

    async def main():
        [result] = await batcher.abatch([{"custom_id": "a", "provider": "emb", "endpoint": "embeddings",
                                          "input": "hello"}])  # fmt: skip
        return result, (await store.snapshot(config.limits)).tpm_tokens_available

    return asyncio.run(main())


def test_the_reservation_is_settled_to_the_reported_prompt_tokens(provider_server):
    result, left = run(provider_server, {"prompt_tokens": 500, "total_tokens": 500})
    assert (result.status, result.prompt_tokens, result.completion_tokens) == ("succeeded", 500, 0)
    assert left < 600  # 1,000 less the 500 reported (the estimate was 2)
    assert provider_server.count("emb") == 1


def test_an_answer_without_usage_keeps_the_estimate(provider_server):
    result, left = run(provider_server, None)
    assert result.status == "succeeded" and result.prompt_tokens is None
    assert left > 990  # only the estimate of 2 was taken

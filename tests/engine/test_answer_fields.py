"""The new answer fields reach the item's result (issue #21): the native answer, the prompt-cache counts
on the result and in the attempt log; the contract RESULT shape is unchanged; the reservation is split
into input and output tokens."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import gateway_engine.wire as wire
from gateway_engine import CrossProviderBatcher
from gateway_engine.breaker import LocalBreaker
from gateway_engine.items import estimate_split, estimate_tokens
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.routing import routing_table
from gateway_engine.wire import Answer, OpenAIWire
from tests.factories import work_item

from .provider_server import Reply
from .test_batcher import FAST_RETRY, provider

MSG = [{"role": "user", "content": "x" * 40}]  # 10 prompt tokens


@pytest.mark.parametrize(
    "params, split",
    [
        ({}, (10, 256)),
        ({"max_tokens": 100}, (10, 100)),
        ({"max_completion_tokens": 300, "max_tokens": 5}, (10, 300)),
        ({"max_tokens": 100, "n": 3}, (10, 300)),
        ({"max_tokens": True}, (10, 256)),
    ],
)
def test_the_estimate_splits_into_input_and_output_and_sums_to_the_total(params, split):
    assert estimate_split(MSG, params, 256) == split
    assert estimate_tokens(MSG, params, 256) == sum(split)


class NativeWire(OpenAIWire):
    """An OpenAI-shaped answer that also carries a native form and cache counts, as the Anthropic and
    Gemini modules return them (wire.Answer)."""

    kind = "native-test"

    def read_answer(self, body: dict[str, Any]) -> Answer:
        usage = dict(body["usage"])
        native = {"native": True, "id": body["id"]}
        return Answer({k: v for k, v in body.items() if k != "x_cache"}, native, usage)


def test_a_succeeded_result_carries_the_native_answer_and_the_cache_counts(provider_server, monkeypatch):
    monkeypatch.setitem(wire._FORMATS, NativeWire.kind, NativeWire())
    usage = {
        "prompt_tokens": 30,
        "completion_tokens": 5,
        "total_tokens": 35,
        "cached_tokens": 12,
        "cache_write_tokens": 8,
    }
    answer = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    provider_server.behaviours["n"] = lambda n, r, a, b: Reply(200, body=answer)
    provider_server.behaviours["plain"] = lambda n, r, a, b: Reply(200)
    native = dataclasses.replace(provider(provider_server, "n"), kind=NativeWire.kind)
    plain = provider(provider_server, "plain")
    batcher = CrossProviderBatcher(
        routing_table([native, plain]),
        store=LocalQuotaStore(),
        breaker=LocalBreaker(),
        options=FAST_RETRY,
    )
    results = asyncio.run(batcher.abatch([work_item("a", provider="n"), work_item("b", provider="plain")]))
    a, b = results
    assert a.ok and a.native_response == {"native": True, "id": "cmpl-1"}
    assert (a.prompt_tokens, a.cached_tokens, a.cache_write_tokens) == (30, 12, 8)
    assert a.attempt_log[0]["cached_tokens"] == 12
    assert "native_response" not in a.as_result() and "native" not in a.as_result()
    assert a.as_result()["response"]["choices"][0]["message"]["content"] == "hi"
    # an OpenAI answer without cache counts: None, and no cached_tokens key in its log entry
    assert b.ok and b.native_response is None
    assert (b.cached_tokens, b.cache_write_tokens) == (None, None)
    assert "cached_tokens" not in b.attempt_log[0]


@pytest.mark.parametrize(
    "limit, params, bucket",
    [
        ({"itpm": 600}, {"max_tokens": 5}, "ITPM"),  # 400 input tokens > the ITPM bucket's 10 s (100)
        ({"otpm": 600}, {"max_tokens": 500}, "OTPM"),  # 500 output tokens > the OTPM bucket's 100
    ],
)
def test_the_item_life_reserves_its_input_and_output_apart(provider_server, limit, params, bucket):
    """The split reaches the store: an item that fits TPM but not the ITPM (or OTPM) bucket can never be
    granted, and nothing is sent."""
    config = provider(provider_server, "split", burst_seconds=10, **limit)
    batcher = CrossProviderBatcher(
        routing_table([config]), store=LocalQuotaStore(), breaker=LocalBreaker(), options=FAST_RETRY
    )
    item = {"custom_id": "s", "provider": "split", "query": "x" * 1600, "params": params}
    (result,) = asyncio.run(batcher.abatch([item]))
    assert (result.status, result.error_type, result.attempts) == ("failed", "quota_impossible", 0)
    assert bucket in result.error_message
    assert provider_server.count("split") == 0

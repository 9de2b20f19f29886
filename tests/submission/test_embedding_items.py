"""Embedding items at submission (issue #39): the item shape (``"endpoint": "embeddings"`` + ``input``),
the params each kind takes, the provider's per-request input limits and the kinds that serve no
embeddings — each refused naming the field (and the provider), nothing returned for storage. Pure: the
routing table is built here and the real wire checks (gateway_engine.wire.embeddings_check) judge."""

from __future__ import annotations

import pytest

from batches.submission.caps import Limits
from batches.submission.errors import SubmissionError
from batches.submission.reach import Reach
from batches.submission.targets import KnownTargets
from batches.submission.validation import check_items
from gateway_engine.quota.types import ProviderLimits
from gateway_engine.routing import ProviderConfig, RouteRule, routing_table

LIMITS = Limits(max_items=100, max_body_bytes=10**9, max_item_bytes=10**8)


def config(name: str, kind: str = "openai", tpm: int = 10**9) -> ProviderConfig:
    limits = ProviderLimits(name=name, rpm=60, tpm=tpm, burst_seconds=1, max_concurrency=1, timeout_seconds=5)
    api_version = "2024-10-21" if kind == "azure_openai" else ""
    return ProviderConfig(
        name=name, base_url="http://x", model="m", limits=limits, kind=kind, api_version=api_version
    )


def targets(providers, rules) -> KnownTargets:
    table = routing_table(providers, rules)
    flags = {p.name: True for p in providers}
    reach = Reach.of(table, flags)
    return KnownTargets(routes=frozenset(reach.routes), providers=flags, reach=reach)


KNOWN = targets(
    [
        config("gpt"),
        config("az", "azure_openai"),
        config("gem", "gemini"),
        config("claude", "anthropic"),
        config("small", tpm=6000),
    ],
    [
        RouteRule("embed", "gpt"),
        RouteRule("embed", "az", priority=1),
        RouteRule("mixed", "gpt"),
        RouteRule("mixed", "claude", priority=1),
    ],
)


def emb(cid: str = "a", text="hello", params=None, **target) -> dict:
    item = {"custom_id": cid, "endpoint": "embeddings", "input": text, **(target or {"route": "embed"})}
    if params is not None:
        item["params"] = params
    return item


def problems(items, known=KNOWN):
    with pytest.raises(SubmissionError) as caught:
        check_items(items, known, LIMITS)
    return [(e.field, e.message) for e in caught.value.errors]


def test_an_embedding_item_is_stored_with_its_input_and_endpoint():
    valid = check_items(
        [
            emb("a", "one"),
            emb("b", ["x", "y"], {"dimensions": 8, "encoding_format": "base64"}, provider="gem"),
        ],
        KNOWN,
        LIMITS,
    )
    assert [(v.endpoint, v.route, v.provider, v.payload) for v in valid] == [
        ("embeddings", "embed", "", {"input": "one", "params": {}}),
        (
            "embeddings",
            "",
            "gem",
            {"input": ["x", "y"], "params": {"dimensions": 8, "encoding_format": "base64"}},
        ),
    ]
    chat = check_items([{"custom_id": "c", "route": "embed", "query": "q"}], KNOWN, LIMITS)
    assert chat[0].endpoint == "chat" and "input" not in chat[0].payload


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (emb(text=""), [("input", "must not be empty")]),
        (emb(text=[]), [("input", "must not be empty")]),
        (
            emb(text=["a", ""]),
            [("input", "every element must be a non-empty string (or every one a token array)")],
        ),
        (
            emb(text=[[1, 2], "x"]),
            [("input", "every element must be a non-empty string (or every one a token array)")],
        ),
        (emb(text=5), [("input", "must be a string or a list of strings, got a number")]),
        (
            {"custom_id": "a", "route": "embed", "endpoint": "embeddings"},
            [("input", "required for an embeddings item: a string or a list of strings")],
        ),
        (
            {**emb(), "messages": [{"role": "user", "content": "x"}]},
            [("messages", "not for an embeddings item: give its text as 'input'")],
        ),
        (
            {"custom_id": "a", "route": "embed", "query": "q", "input": "x"},
            [("input", 'only for embeddings items: add "endpoint": "embeddings", or use messages/query')],
        ),
        ({**emb(), "endpoint": "images"}, [("endpoint", "must be 'chat' or 'embeddings', got a string")]),
        ({**emb(), "endpoint": "responses"}, [("endpoint", "must be 'chat' or 'embeddings', got a string")]),
    ],
)
def test_the_shape_of_an_embedding_item(item, expected):
    assert problems([item]) == expected


def test_params_each_kind_takes():
    assert problems([emb(params={"dimensions": 0})]) == [
        ("params.dimensions", "0 is below 1 for provider 'gpt' (kind openai)"),
        ("params.dimensions", "0 is below 1 for provider 'az' (kind azure_openai)"),
    ]
    assert problems([emb(params={"model": "x"}, provider="gpt")]) == [
        ("params.model", "is set by the gateway; remove it")
    ]
    assert problems([emb(params={"encoding_format": "int8", "temperature": 1}, provider="gpt")]) == [
        ("params.encoding_format", "'int8' is not one of float, base64 for provider 'gpt' (kind openai)"),
        ("params.temperature", "not taken by provider 'gpt' (kind openai)"),
    ]
    assert problems([emb(params={"user": "u", "dimensions": 4000}, provider="gem")]) == [
        ("params.user", "not taken by provider 'gem' (kind gemini)"),
        ("params.dimensions", "4000 is above 3072 for provider 'gem' (kind gemini)"),
    ]
    assert check_items([emb(params={"user": "u", "dimensions": 3}, provider="gpt")], KNOWN, LIMITS)


def test_the_providers_input_limits_are_enforced_naming_the_field():
    assert problems([emb(text=["x"] * 2049)]) == [
        ("input", "2049 inputs, more than the 2048 of one request for provider 'gpt' (kind openai)"),
        ("input", "2049 inputs, more than the 2048 of one request for provider 'az' (kind azure_openai)"),
    ]
    assert problems([emb(text=["x"] * 101, provider="gem")]) == [
        ("input", "101 inputs, more than the 100 of one request for provider 'gem' (kind gemini)")
    ]
    long = "x" * (8192 * 4 + 4)  # 8,193 tokens by the estimate (characters / 4)
    assert problems([emb(text=["ok", long], provider="gpt")]) == [
        ("input[1]", "about 8193 tokens, more than the 8192 of one input for provider 'gpt' (kind openai)")
    ]
    assert problems([emb(text="x" * (2048 * 4 + 1), provider="gem")]) == [
        ("input", "about 2049 tokens, more than the 2048 of one input for provider 'gem' (kind gemini)")
    ]
    many = ["y" * 8000 * 4] * 38  # 38 × 8,000 = 304,000 tokens summed
    assert problems([emb(text=many, provider="gpt")]) == [
        (
            "input",
            "about 304000 tokens in all, more than the 300000 of one request for provider 'gpt' (kind openai)",
        )
    ]
    assert check_items([emb(text=["y" * 8000 * 4] * 37, provider="gpt")], KNOWN, LIMITS)


def test_a_kind_without_embeddings_is_refused_naming_the_kind_and_the_provider():
    found = problems([emb(provider="claude")])
    assert len(found) == 1 and found[0][0] == "provider"
    assert "provider 'claude' (kind anthropic) serves no embeddings" in found[0][1]
    assert "kinds with embeddings: azure_openai, gemini, openai" in found[0][1]
    # a route with one such provider among its fallbacks is refused on its route
    assert [f for f, _ in problems([emb(route="mixed")])] == ["route"]


def test_a_bucket_that_can_never_hold_the_input_is_refused_on_input():
    found = problems([emb(text="z" * 4000, provider="small")])  # 1,000 tokens, a bucket of 100
    assert [f for f, _ in found] == ["input"] and found[0][1].startswith("quota_impossible: ")
    assert check_items([emb(text="z" * 200, provider="small")], KNOWN, LIMITS)  # 50 tokens, no completion


def test_token_arrays_as_openai_takes_them():
    """One token array, or a list of them (what LangChain sends after tokenizing): counted exactly, taken
    by kinds openai and azure_openai, refused for gemini naming input; mixed lists are refused."""
    valid = check_items(
        [emb("a", [1, 2, 3], provider="gpt"), emb("b", [[1, 2], [3]], provider="az")], KNOWN, LIMITS
    )
    assert [v.payload["input"] for v in valid] == [[1, 2, 3], [[1, 2], [3]]]
    assert problems([emb(text=[[1], [2]], provider="gem")]) == [
        ("input", "token arrays are not taken (give the texts) for provider 'gem' (kind gemini)")
    ]
    assert problems([emb(text=["a", [1]], provider="gpt")]) == [
        ("input", "every element must be a non-empty string (or every one a token array)")
    ]
    assert problems([emb(text=[[1, -2]], provider="gpt")]) == [
        ("input", "every element must be a non-empty string (or every one a token array)")
    ]
    assert problems([emb(text=[0] * 8193, provider="gpt")]) == [
        ("input", "about 8193 tokens, more than the 8192 of one input for provider 'gpt' (kind openai)")
    ]
    assert problems([emb(text=[[0], [0] * 8193], provider="gpt")])[0][0] == "input[1]"

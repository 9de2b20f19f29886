"""The pure submission validator (batches.submission.validation): no database, no settings — the known
routes and providers and the limits are passed in. Plain pytest: no django_db mark."""

from __future__ import annotations

import pytest

from batches.submission.caps import Limits
from batches.submission.errors import SubmissionError
from batches.submission.targets import KnownTargets
from batches.submission.validation import ItemValidator, check_items

LIMITS = Limits(max_items=10, max_body_bytes=10_000, max_item_bytes=1_000)
TARGETS = KnownTargets(routes=frozenset({"intent", "summary"}), providers={"alpha": True, "beta": False})


def problems(items, targets=TARGETS, limits=LIMITS):
    with pytest.raises(SubmissionError) as caught:
        check_items(items, targets, limits)
    return [(e.index, e.field, e.message) for e in caught.value.errors]


def test_valid_items_come_back_with_their_payload_and_target():
    valid = check_items(
        [
            {"custom_id": "a", "route": "intent", "query": "hi"},
            {
                "custom_id": "b",
                "provider": "alpha",
                "messages": [{"role": "user", "content": "x"}],
                "params": {"n": 1},
            },
        ],
        TARGETS,
        LIMITS,
    )
    assert [(v.seq, v.custom_id, v.route, v.provider) for v in valid] == [
        (0, "a", "intent", ""),
        (1, "b", "", "alpha"),
    ]
    assert valid[0].payload == {"messages": [{"role": "user", "content": "hi"}], "params": {}}
    assert valid[1].payload_json == '{"messages":[{"role":"user","content":"x"}],"params":{"n":1}}'


def test_the_constructor_reads_nothing():
    validator = ItemValidator(LIMITS, KnownTargets())
    assert validator.item(0, {"custom_id": "a", "route": "intent", "query": "q"}, None) is None
    assert [(e.field, e.message) for e in validator.errors] == [
        ("route", "unknown route 'intent': no enabled routing rule to an enabled provider")
    ]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("x", [(0, "item", "must be an object, got a string")]),
        ({"route": "intent", "query": "q"}, [(0, "custom_id", "required: a string unique in the batch")]),
        (
            {"custom_id": 5, "route": "intent", "query": "q"},
            [(0, "custom_id", "must be a string, got a number")],
        ),
        ({"custom_id": " ", "route": "intent", "query": "q"}, [(0, "custom_id", "must not be empty")]),
        ({"custom_id": "a", "query": "q"}, [(0, "route", "one of 'route' or 'provider' is required")]),
        (
            {"custom_id": "a", "route": "intent", "provider": "", "query": "q"},
            [(0, "route", "give exactly one of 'route' or 'provider', not both")],
        ),
        (
            {"custom_id": "a", "route": "intent"},
            [(0, "messages", "one of 'messages' or 'query' is required")],
        ),
        ({"custom_id": "a", "route": "intent", "query": None}, [(0, "query", "must be a string, got null")]),
        (
            {"custom_id": "a", "route": "intent", "messages": {}},
            [(0, "messages", "must be a list of {role, content} objects, got an object")],
        ),
        (
            {"custom_id": "a", "route": "intent", "messages": []},
            [(0, "messages", "must contain at least one message")],
        ),
        (
            {"custom_id": "a", "route": "intent", "query": "q", "params": []},
            [(0, "params", "must be an object, got a list")],
        ),
        (
            {"custom_id": "a", "provider": "beta", "query": "q"},
            [(0, "provider", "provider 'beta' is disabled")],
        ),
        (
            {"custom_id": "a", "route": "alpha", "query": "q"},
            [(0, "route", "unknown route 'alpha' — 'alpha' is a provider: use \"provider\": \"alpha\"")],
        ),
        (
            {"custom_id": "a", "provider": "alpah", "query": "q"},
            [(0, "provider", "unknown provider 'alpah' — did you mean 'alpha'?")],
        ),
        (
            {"custom_id": "a", "route": "intnet", "query": "q"},
            [
                (
                    0,
                    "route",
                    "unknown route 'intnet': no enabled routing rule to an enabled provider — did you mean 'intent'?",
                )
            ],
        ),
    ],
)
def test_each_problem_is_worded_as_the_api_answers_it(item, expected):
    assert problems([item]) == expected


def test_every_group_of_an_item_is_checked_in_order():
    item = {
        "custom_id": "",
        "route": "intent",
        "provider": "alpha",
        "messages": "x",
        "params": {"model": "m"},
    }
    assert problems([item]) == [
        (0, "custom_id", "must not be empty"),
        (0, "route", "give exactly one of 'route' or 'provider', not both"),
        (0, "messages", "must be a list of {role, content} objects, got a string"),
        (0, "params.model", "is set by the gateway; remove it"),
    ]


def test_duplicates_and_the_item_limit():
    items = [{"custom_id": "a", "route": "intent", "query": "q"}] * 2
    assert problems(items) == [(1, "custom_id", "duplicate custom_id 'a'; first used by item 0")]
    assert problems([{"custom_id": "a", "route": "intent", "query": "q" * 2000}]) == [
        (0, "query", "is 2000 characters; at most 1000 per item")
    ]
    assert problems([]) == [(None, "items", "must contain at least one item")]

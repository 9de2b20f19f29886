"""The one item-shape rule (gateway_engine.item_shape) and how WorkItem.coerce words it."""

from __future__ import annotations

import pytest

from gateway_engine.item_shape import LENIENT, STRICT, Problem, check_item_shape
from gateway_engine.items import WorkItem

OK = {"custom_id": "a", "route": "r", "query": "q"}


def found(item, reading):
    return [(p.field, p.problem) for p in check_item_shape(item, reading).problems]


def test_a_sound_item_names_its_target_and_content():
    shape = check_item_shape(OK, STRICT)
    assert shape.ok and (shape.target, shape.content) == ("route", "query")
    shape = check_item_shape({"custom_id": "a", "provider": "p", "messages": [{}]}, LENIENT)
    assert shape.ok and (shape.target, shape.content) == ("provider", "messages")


def test_problems_come_in_rule_order_one_per_group():
    item = {"custom_id": "", "route": "r", "provider": "p", "messages": [], "params": []}
    assert found(item, STRICT) == [
        ("custom_id", Problem.CUSTOM_ID_EMPTY),
        ("route", Problem.TARGET_BOTH),
        ("messages", Problem.MESSAGES_EMPTY),
        ("params", Problem.PARAMS_NOT_AN_OBJECT),
    ]


def test_the_readings_differ_only_in_what_counts_as_given():
    item = {"custom_id": "a", "route": "r", "provider": "", "query": "q", "params": None}
    assert found(item, LENIENT) == []  # an empty provider and a null params are absent
    assert found(item, STRICT) == [("route", Problem.TARGET_BOTH), ("params", Problem.PARAMS_NOT_AN_OBJECT)]
    assert found({"custom_id": "a", "route": "r", "messages": None, "query": "q"}, LENIENT) == []
    assert found({"custom_id": "a", "route": "r", "messages": None, "query": "q"}, STRICT) == [
        ("messages", Problem.CONTENT_BOTH)
    ]
    assert found("x", STRICT) == [("", Problem.NOT_AN_OBJECT)]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("x", "items[3]: must be a dict or WorkItem, got str"),
        ({"route": "r", "query": "q"}, "items[3].custom_id: must be a non-empty string"),
        ({"custom_id": "", "route": "r", "query": "q"}, "items[3].custom_id: must be a non-empty string"),
        ({"custom_id": "a", "query": "q"}, "items[3]: exactly one of route/provider is required"),
        (
            {"custom_id": "a", "route": "r", "provider": "p", "query": "q"},
            "items[3]: exactly one of route/provider is required",
        ),
        ({"custom_id": "a", "route": "r"}, "items[3]: exactly one of messages/query is required"),
        ({"custom_id": "a", "route": "r", "query": 1}, "items[3].query: must be a string"),
        ({"custom_id": "a", "route": "r", "messages": []}, "items[3].messages: must be a non-empty list"),
        ({"custom_id": "a", "route": "r", "query": "q", "params": [1]}, "items[3].params: must be an object"),
    ],
)
def test_coerce_words_the_first_problem(item, message):
    with pytest.raises(ValueError) as caught:
        WorkItem.coerce(item, 3)
    assert str(caught.value) == message


def test_coerce_builds_the_work_item():
    item = WorkItem.coerce({"custom_id": "a", "provider": "p", "query": "hi", "params": None, "key": "k"})
    assert (item.custom_id, item.route, item.provider, item.key) == ("a", "", "p", "k")
    assert item.messages == [{"role": "user", "content": "hi"}] and item.params == {}


def test_an_embeddings_item_names_input_as_its_content():
    item = {"custom_id": "a", "route": "r", "endpoint": "embeddings", "input": ["x", "y"]}
    shape = check_item_shape(item, STRICT)
    assert shape.ok and (shape.content, shape.endpoint) == ("input", "embeddings")
    assert (
        check_item_shape({**item, "endpoint": None}, LENIENT).problem("input") is Problem.INPUT_NOT_FOR_CHAT
    )
    assert (
        check_item_shape({**item, "endpoint": None}, STRICT).problem("endpoint") is Problem.ENDPOINT_UNKNOWN
    )
    assert check_item_shape({**item, "query": "q"}, STRICT).problem("query") is (
        Problem.CONTENT_NOT_FOR_EMBEDDINGS
    )


def test_coerce_builds_an_embeddings_work_item():
    work = WorkItem.coerce({"custom_id": "a", "provider": "p", "endpoint": "embeddings", "input": "hi"})
    assert (work.endpoint, work.input, work.messages) == ("embeddings", "hi", [])
    with pytest.raises(ValueError, match=r"items\[0\]\.input: must not be empty"):
        WorkItem.coerce({"custom_id": "a", "provider": "p", "endpoint": "embeddings", "input": ""})
    with pytest.raises(ValueError, match=r"items\[0\]\.endpoint: must be 'chat' or 'embeddings'"):
        WorkItem.coerce({"custom_id": "a", "provider": "p", "endpoint": "x", "query": "q"})

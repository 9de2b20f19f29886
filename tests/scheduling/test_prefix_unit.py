"""Prefix grouping's pure rules (batches/scheduling/prefix.py): the key computed at submission and the
order of one team's quantum (issue #25)."""

from __future__ import annotations

from types import SimpleNamespace

from batches.scheduling.prefix import (
    MIN_PREFIX_CHARS,
    PrefixGrouping,
    group_by_prefix,
    prefix_key,
    prefix_keyer,
)

LONG = "r" * MIN_PREFIX_CHARS


def item(system: str, user: str = "q", **params) -> dict:
    payload: dict = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    if params:
        payload["params"] = params
    return payload


def test_the_key_is_the_leading_messages_and_tools_not_the_last_message():
    assert prefix_key(item(LONG, "one")) == prefix_key(item(LONG, "two")) != ""
    assert prefix_key(item(LONG)) != prefix_key(item(LONG + "x"))
    tool = [{"type": "function", "function": {"name": "f"}}]
    assert prefix_key(item(LONG, tools=tool)) != prefix_key(item(LONG))
    assert prefix_key(item(LONG, temperature=0)) == prefix_key(
        item(LONG, temperature=1)
    )  # params are not prompt
    assert len(prefix_key(item(LONG))) == 32


def test_no_key_without_a_shared_part_worth_caching():
    assert prefix_key({"messages": [{"role": "user", "content": LONG}]}) == ""  # a lone message
    assert prefix_key(item("short system prompt")) == ""
    parts = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    marked = {"messages": [{"role": "system", "content": parts}, {"role": "user", "content": "q"}]}
    assert prefix_key(marked) != "" and prefix_key(marked) != prefix_key(item(LONG))


def test_the_memoized_keyer_agrees_with_prefix_key():
    keyer = prefix_keyer()
    tool = [{"type": "function", "function": {"name": "f"}}]
    parts = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": LONG}]},
            {"role": "user", "content": "q"},
        ]
    }
    for payload in (
        item(LONG, "a"),
        item(LONG, "b"),
        item(LONG + "y"),
        item("s"),
        item(LONG, tools=tool),
        parts,
    ):
        assert keyer(payload) == prefix_key(payload)


def test_groups_go_together_in_order_of_their_first_item_and_keyless_items_stay_in_place():
    keys = ["a", "b", "", "a", "c", "b", "a"]
    assert group_by_prefix(keys) == [0, 3, 6, 1, 5, 2, 4]
    assert group_by_prefix(["", "", ""]) == [0, 1, 2]
    assert group_by_prefix(["x", "y", "z"]) == [0, 1, 2]  # nothing shared: unchanged
    assert group_by_prefix([]) == []


def test_the_current_group_goes_first_and_the_order_is_a_permutation():
    keys = ["a", "b", "", "a", "c", "b"]
    assert group_by_prefix(keys, current="b") == [1, 5, 0, 3, 2, 4]
    assert group_by_prefix(keys, current="zz") == group_by_prefix(keys)
    assert sorted(group_by_prefix(keys, "c")) == list(range(len(keys)))


def test_the_grouping_state_is_per_queue_and_team_and_off_changes_nothing():
    rows = [SimpleNamespace(prefix_key=k, n=i) for i, k in enumerate(["a", "b", "a", "b"])]
    on = PrefixGrouping(True)
    assert on.prefer("p", "t1") == ""
    assert [r.n for r in on.order("p", "t1", rows)] == [0, 2, 1, 3]
    assert on.prefer("p", "t1") == "b" and on.prefer("p", "t2") == "" and on.prefer("q", "t1") == ""
    assert [r.n for r in on.order("p", "t1", rows)] == [1, 3, 0, 2]  # continues b
    off = PrefixGrouping(False)
    assert [r.n for r in off.order("p", "t1", rows)] == [0, 1, 2, 3] and off.prefer("p", "t1") is None

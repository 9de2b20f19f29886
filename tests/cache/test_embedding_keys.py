"""The response cache's key of an embeddings item (response_cache.keys.keyed_content): taken over its
input, so two embedding items never share a key (before, both had no messages: one key for all) and an
embedding item never shares one with a chat item; a chat item's key is what it was."""

from __future__ import annotations

from response_cache import keys


def key(payload) -> str:
    return keys.cache_key(team="1", provider="p", model="m", messages=keys.keyed_content(payload),
                          params=payload.get("params"))  # fmt: skip


def test_embedding_items_are_keyed_by_their_input():
    a, b = {"input": ["one"], "params": {}}, {"input": ["two"], "params": {}}
    assert key(a) != key(b)
    assert key(a) == key({"input": ["one"], "params": {"user": "u"}})  # user does not change the answer
    assert key(a) != key({"input": ["one"], "params": {"dimensions": 8}})
    assert key({"input": "one", "params": {}}) != key(a)  # a string answers one vector, not a list of one


def test_a_chat_items_key_is_unchanged_and_never_an_embeddings_key():
    chat = {"messages": [{"role": "user", "content": "one"}], "params": {}}
    assert keys.keyed_content(chat) == keys.expand_messages(chat["messages"])
    assert key(chat) != key({"input": "one", "params": {}})

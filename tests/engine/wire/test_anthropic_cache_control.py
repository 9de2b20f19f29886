"""Anthropic ``cache_control`` markers (prompt-caching breakpoints) pass through the translation from the
OpenAI-style item untouched: on a system message's parts (the system becomes text blocks), on user text
and image parts; a malformed marker is refused naming the field (issue #25)."""

from __future__ import annotations

import pytest

from gateway_engine.wire import RequestProblems
from gateway_engine.wire.anthropic import AnthropicWire

from .helpers import config

WIRE = AnthropicWire()
CLAUDE = config("anthropic")
MARK = {"type": "ephemeral"}


def test_a_marked_system_message_becomes_a_marked_system_block():
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "long rules", "cache_control": MARK}]},
        {"role": "system", "content": "more"},
        {"role": "user", "content": "q"},
    ]
    body = WIRE.body(CLAUDE, messages, None)
    assert body["system"] == [
        {"type": "text", "text": "long rules", "cache_control": MARK},
        {"type": "text", "text": "more"},
    ]
    assert body["messages"] == [{"role": "user", "content": "q"}]


def test_marked_user_parts_keep_their_marker_and_unmarked_items_are_unchanged():
    ttl = {"type": "ephemeral", "ttl": "1h"}
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [
            {"type": "text", "text": "document", "cache_control": ttl},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}, "cache_control": MARK},
            {"type": "text", "text": "question"},
        ]},
    ]  # fmt: skip
    body = WIRE.body(CLAUDE, messages, None)
    assert body["system"] == "rules"
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "document", "cache_control": ttl},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}, "cache_control": MARK},
        {"type": "text", "text": "question"},
    ]
    one = [{"role": "user", "content": [{"type": "text", "text": "only", "cache_control": MARK}]}]
    assert WIRE.body(CLAUDE, one, None)["messages"][0]["content"] == [
        {"type": "text", "text": "only", "cache_control": MARK}
    ]  # a single marked block is not collapsed into a plain string (that would drop the marker)


@pytest.mark.parametrize(
    ("mark", "field"),
    [
        ({"type": "persistent"}, "messages[0].content[0].cache_control"),
        ({"type": "ephemeral", "ttl": "2h"}, "messages[0].content[0].cache_control"),
        ("ephemeral", "messages[0].content[0].cache_control"),
    ],
)
def test_a_malformed_marker_is_refused_naming_the_field(mark, field):
    for role in ("system", "user"):
        messages = [{"role": role, "content": [{"type": "text", "text": "x", "cache_control": mark}]}]
        if role == "system":
            messages.append({"role": "user", "content": "q"})
        problems = WIRE.check_messages(CLAUDE, messages)
        assert [p.field for p in problems] == [field]
        with pytest.raises(RequestProblems):
            WIRE.body(CLAUDE, messages, None)

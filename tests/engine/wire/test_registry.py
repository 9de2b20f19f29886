"""Every kind is registered, speaks the seam (WireFormat), and answers check_request for an item."""

from __future__ import annotations

import pytest

from gateway_engine.http import wire_for
from gateway_engine.kinds import KINDS
from gateway_engine.wire import KNOWN_KINDS, WireFormat, check_request, for_kind

from .helpers import config


def test_every_described_kind_is_known():
    assert KNOWN_KINDS == tuple(sorted(KINDS)) == ("anthropic", "azure_openai", "bedrock", "gemini", "openai")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_a_wire_format_with_the_same_reserved_params(kind):
    wire: WireFormat = for_kind(kind)
    assert wire.kind == kind and isinstance(wire_for(config(kind)), type(wire))
    assert wire.reserved_params == frozenset({"model", "messages", "stream"})
    assert hasattr(wire, "check_messages")


def test_check_request_combines_params_and_messages():
    audio = [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]
    problems = check_request(config("anthropic"), audio, {"temperature": 1.5})
    assert [p.field for p in problems] == ["params.temperature", "messages[0].content[0]"]
    assert check_request(config("openai"), audio, {"temperature": 1.5}) == []
    assert check_request(config("gemini"), [{"role": "user", "content": "x"}], {"temperature": 1.5}) == []

"""Every provider kind streams (gateway_engine.wire.stream_base.StreamingWire): the members exist at run
time with the protocol's signatures, each decoder has the StreamDecoder members, and
``streaming_for_kind`` names the same format ``for_kind`` does (mypy checks the types statically:
``wire._STREAMING`` is typed by the protocol)."""

from __future__ import annotations

import inspect

import pytest

from gateway_engine.wire import (
    KNOWN_KINDS,
    SseEvent,
    StreamDecoder,
    StreamingWire,
    StreamStep,
    UnknownWireKind,
    for_kind,
    streaming_for_kind,
)

from .helpers import config


def members(protocol: type) -> list[str]:
    return sorted(
        name for name in vars(protocol) if not name.startswith("_") and name not in {"register", "mro"}
    )


def test_the_protocols_members():
    assert members(StreamingWire) == ["stream_body", "stream_decoder", "stream_endpoint"]
    assert members(StreamDecoder) == ["feed", "usage", "usage_chunk"]


@pytest.mark.parametrize("kind", KNOWN_KINDS)
def test_every_known_kind_implements_streaming_wire(kind):
    wire = streaming_for_kind(kind)
    assert wire is for_kind(kind)
    for name in members(StreamingWire):
        theirs = inspect.signature(getattr(StreamingWire, name))
        ours = inspect.signature(getattr(type(wire), name))
        assert list(ours.parameters) == list(theirs.parameters), (kind, name)
        assert [p.kind for p in ours.parameters.values()] == [p.kind for p in theirs.parameters.values()]
    cfg = config(kind)
    assert wire.stream_endpoint(cfg).url.startswith(cfg.base_url.rstrip("/"))
    assert isinstance(wire.stream_body(cfg, [{"role": "user", "content": "hi"}], {}), dict)


@pytest.mark.parametrize("kind", KNOWN_KINDS)
def test_every_decoder_implements_stream_decoder(kind):
    decoder = streaming_for_kind(kind).stream_decoder(config(kind), completion_id="c", created=1)
    for name in members(StreamDecoder):
        assert hasattr(decoder, name), (kind, name)
    assert decoder.usage is None and decoder.usage_chunk() is None
    step = decoder.feed(SseEvent("", "not json"))
    assert isinstance(step, StreamStep) and step.error is not None
    assert decoder.feed(SseEvent("", "{}")) == StreamStep()  # nothing after the error
    assert decoder.usage is None


def test_decoders_are_one_per_stream():
    wire, cfg = streaming_for_kind("anthropic"), config("anthropic")
    first = wire.stream_decoder(cfg, completion_id="a", created=1)
    assert wire.stream_decoder(cfg, completion_id="a", created=1) is not first


def test_an_unknown_kind_is_refused():
    with pytest.raises(UnknownWireKind, match="known kinds are"):
        streaming_for_kind("cohere")

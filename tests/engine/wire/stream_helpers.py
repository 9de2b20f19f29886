"""Shared helpers for the stream tests: the raw SSE transcripts (each opens with SSE comment lines citing
the reference page it was written from), the awkward ways a transport can cut them, and one run of a
transcript through ``SseParser`` and a kind's ``StreamDecoder``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway_engine.wire import SseParser, StreamError, streaming_for_kind

from .helpers import FIXTURES, config

COMPLETION_ID = "chatcmpl-gw-1"
CREATED = 1_760_000_000


def transcript(name: str) -> bytes:
    raw = (FIXTURES / f"{name}.sse").read_bytes()
    assert raw.startswith(b": source: https://"), f"{name}.sse must cite its source"
    return raw


def data_objects(raw: bytes) -> list[Any]:
    """The JSON of every ``data:`` line of a transcript (one line per event in these fixtures)."""
    return [
        json.loads(line[6:])
        for line in raw.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def cuts(raw: bytes) -> dict[str, list[bytes]]:
    """The transcript cut as a transport might deliver it: whole, byte by byte, in 7-byte pieces, right
    after every CR (a CRLF split across two chunks) and inside every multi-byte UTF-8 character."""
    out = {
        "whole": [raw],
        "bytes": [raw[i : i + 1] for i in range(len(raw))],
        "sevens": [raw[i : i + 7] for i in range(0, len(raw), 7)],
    }
    out["after_cr"] = _split_at(raw, [i + 1 for i, b in enumerate(raw) if b == 0x0D])
    out["inside_utf8"] = _split_at(raw, [i for i, b in enumerate(raw) if 0x80 <= b < 0xC0])
    return out


def _split_at(raw: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *points, len(raw)]
    return [raw[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


@dataclass
class Run:
    chunks: list[dict[str, Any]] = field(default_factory=list)
    error: StreamError | None = None
    done: bool = False
    steps: int = 0
    usage: Any = None
    usage_chunk: Any = None


def run(kind: str, pieces: list[bytes], **overrides: object) -> Run:
    """Every piece through a parser and a fresh decoder of ``kind``; the stream's end closes the parser."""
    decoder = streaming_for_kind(kind).stream_decoder(
        config(kind, **overrides), completion_id=COMPLETION_ID, created=CREATED
    )
    parser = SseParser()
    out = Run()
    events = [event for piece in pieces for event in parser.feed(piece)] + parser.close()
    for event in events:
        step = decoder.feed(event)
        out.steps += 1
        out.chunks += step.chunks
        if step.error is not None:
            assert out.error is None, "one error per stream"
            out.error = step.error
        out.done = out.done or step.done
    out.usage, out.usage_chunk = decoder.usage, decoder.usage_chunk()
    return out


def run_all_cuts(kind: str, name: str) -> Run:
    """The transcript run whole, and the same result (chunks, error, done, usage) however it is cut."""
    raw = transcript(name)
    whole = run(kind, [raw])
    for how, pieces in cuts(raw).items():
        cut = run(kind, pieces)
        assert (cut.chunks, cut.error, cut.done, cut.usage, cut.usage_chunk) == (
            whole.chunks,
            whole.error,
            whole.done,
            whole.usage,
            whole.usage_chunk,
        ), how
    return whole


def translated_chunk(
    model: str, delta: dict[str, Any], finish: str | None = None, index: int = 0
) -> dict[str, Any]:
    """What a translated kind's chunk must look like (named COMPLETION_ID / CREATED)."""
    return {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def content(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])

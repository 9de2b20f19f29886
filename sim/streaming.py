"""Streamed answers: what every kind's stream shares — its shape (content chunks, delay, a mid-stream fault),
the ``[[sim:...=N]]`` triggers that set it per request, the framing on the wire, and the plan of events.

A kind renders one answer as a ``StreamPlan`` (sim/wire_*.py ``stream_plan``): ``head`` events (OpenAI's
role chunk, Azure's prompt-filter chunk, Anthropic's message_start / content_block_start / ping), the
``content`` events (one per text piece: the answer's text split in ``stream_chunks`` pieces, so the pieces
joined are the plain answer's text), the ``tail`` events (the finish chunk, the usage chunk, ``[DONE]``;
content_block_stop / message_delta / message_stop) and the kind's in-stream ``error`` event. The pipeline
(sim/provider.py) writes head, content (``chunk_delay_ms`` apart) and tail; with ``stream_error_after: N``
it writes the error event after N content events and ends the stream there, with ``stream_cut_after: N``
it closes the connection after N content events, with no end at all (a chunked body without its last
chunk). N larger than the content events: after all of them (before the tail).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from sim.config import ProviderConfig

# [[sim:stream_chunks=20]] [[sim:chunk_delay_ms=50]] [[sim:stream_error_after=2]] [[sim:stream_cut_after=1]]
# in the last message's text set the stream's shape for that request (the config's values otherwise).
STREAM_TRIGGER_RE = re.compile(
    r"\[\[sim:(stream_chunks|chunk_delay_ms|stream_error_after|stream_cut_after)=([^\]]*)\]\]"
)
MAX_CHUNKS = 10_000


@dataclass(frozen=True)
class StreamShape:
    chunks: int = 4  # content pieces (at most one per character of the text)
    delay_s: float = 0.0  # real seconds between content events
    error_after: int | None = None  # content events before the in-stream error event
    cut_after: int | None = None  # content events before the connection is closed


def _trigger_value(name: str, raw: str) -> int | float | str:
    """The trigger's value, or a message naming the trigger and what it takes."""
    where = f"[[sim:{name}={raw}]]"
    try:
        value = float(raw) if name == "chunk_delay_ms" else int(raw)
    except ValueError:
        kind = "a number" if name == "chunk_delay_ms" else "an integer"
        return f"{where}: {name} must be {kind}"
    low = 1 if name == "stream_chunks" else 0
    if not value >= low or value == float("inf"):
        return f"{where}: {name} must be >= {low}"
    if name == "stream_chunks" and value > MAX_CHUNKS:
        return f"{where}: {name} must be <= {MAX_CHUNKS}"
    return value


def stream_shape(cfg: ProviderConfig, last_text: str, time_scale: float) -> StreamShape | str:
    """The provider's stream shape with the triggers of ``last_text`` applied; a problem message when a
    trigger's value is bad (or both faults are asked for)."""
    values: dict[str, Any] = {"stream_chunks": cfg.stream_chunks, "chunk_delay_ms": cfg.chunk_delay_ms}
    faults: dict[str, int] = {}
    for m in STREAM_TRIGGER_RE.finditer(last_text):
        name, value = m.group(1), _trigger_value(m.group(1), m.group(2).strip())
        if isinstance(value, str):
            return value
        if name in ("stream_error_after", "stream_cut_after"):
            faults[name] = int(value)
        else:
            values[name] = value
    if len(faults) > 1:
        return "[[sim:stream_error_after=N]] and [[sim:stream_cut_after=N]]: give one of them, not both"
    if not faults:  # a fault trigger replaces the config's fault; none: the config's
        if cfg.stream_error_after is not None:
            faults["stream_error_after"] = cfg.stream_error_after
        if cfg.stream_cut_after is not None:
            faults["stream_cut_after"] = cfg.stream_cut_after
    return StreamShape(
        chunks=int(values["stream_chunks"]),
        delay_s=float(values["chunk_delay_ms"]) / 1000.0 / time_scale,
        error_after=faults.get("stream_error_after"),
        cut_after=faults.get("stream_cut_after"),
    )


def split_text(text: str, chunks: int) -> list[str]:
    """``text`` in ``chunks`` consecutive pieces as even as can be (fewer when the text is shorter; none
    for an empty text). ``"".join(pieces) == text``."""
    n = min(chunks, len(text))
    if n <= 0:
        return []
    size, extra = divmod(len(text), n)
    pieces, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


# One event: (SSE event name or None, data: a JSON value, or a raw string such as "[DONE]").
Event = tuple[str | None, Any]


class Framing:
    """How events go on the wire. ``sse``: ``data: <json>`` (+ ``event: <name>`` when named), events
    separated by a blank line (``newline`` at the end of each line); ``json``: one JSON array streamed
    element by element (Gemini's streamGenerateContent without alt=sse)."""

    def __init__(
        self, kind: str = "sse", newline: str = "\n", content_type: str = "text/event-stream; charset=utf-8"
    ):
        self.kind = kind
        self.newline = newline
        self.content_type = content_type

    def encode(self, event: Event, position: int) -> bytes:
        """The bytes of ``event``, the ``position``-th element written (0: the first)."""
        name, data = event
        text = data if isinstance(data, str) else dumps(data)
        if self.kind == "json":
            return (("[" if position == 0 else ",\r\n") + text).encode()
        nl = self.newline
        lines = (f"event: {name}{nl}" if name else "") + f"data: {text}{nl}{nl}"
        return lines.encode()

    def close(self, written: int) -> bytes:
        """What ends the body once ``written`` elements were written (the JSON array's bracket)."""
        if self.kind == "json":
            return b"]" if written else b"[]"
        return b""


SSE = Framing()


@dataclass
class StreamPlan:
    """One streamed answer, event by event (see the module docstring)."""

    framing: Framing
    head: list[Event] = field(default_factory=list)
    content: list[Event] = field(default_factory=list)
    tail: list[Event] = field(default_factory=list)
    error: Event = (None, {})

"""How a kind's stream is cut into events: its descriptor's ``framing`` (gateway_engine/kinds.py) →
the parser (``feed(bytes)`` / ``close()`` → ``SseEvent`` values) and the content type a streamed
answer must carry (anything else is an error answer or an ``invalid_response``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..kinds import AWS_EVENTSTREAM, KINDS, SSE
from .eventstream import EventStreamParser
from .framing_errors import StreamFramingError
from .sse import SseParser
from .stream_base import SseEvent

__all__ = ["Framing", "StreamFramingError", "StreamParser", "framing_for"]


class StreamParser(Protocol):
    def feed(self, chunk: bytes) -> list[SseEvent]: ...

    def close(self) -> list[SseEvent]: ...


@dataclass(frozen=True)
class Framing:
    name: str
    content_type: str  # what a streamed answer's Content-Type starts with (and the request's Accept)

    def parser(self) -> StreamParser:
        return EventStreamParser() if self.name == AWS_EVENTSTREAM else SseParser()


_FRAMINGS = {
    SSE: Framing(SSE, "text/event-stream"),
    AWS_EVENTSTREAM: Framing(AWS_EVENTSTREAM, "application/vnd.amazon.eventstream"),
}


def framing_for(kind: str) -> Framing:
    """The framing of kind ``kind``'s streams (SSE for a kind the descriptors do not know)."""
    descriptor = KINDS.get(kind)
    return _FRAMINGS[descriptor.framing if descriptor is not None else SSE]

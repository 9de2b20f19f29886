"""The streaming side of the wire-format seam: Server-Sent Events in, OpenAI ``chat.completion.chunk``
objects out (the interactive lane's ``stream: true``, issue #22). No I/O, no state beyond one stream.

``gateway_engine.http`` opens the request (``StreamingWire.stream_endpoint`` / ``stream_body``: the
same request as ``endpoint`` / ``body`` with streaming switched on and the usage asked for — e.g.
``stream_options.include_usage`` for the OpenAI kinds), feeds the raw bytes to the kind's framing
parser (``wire.framing``: an ``SseParser``, or AWS's eventstream decoder for bedrock, both yielding
``SseEvent``) and each event to the stream's ``StreamDecoder``; every ``StreamStep`` says which OpenAI chunks to forward, and
whether the provider reported an error inside the stream or said the answer is complete.

The usage never travels as a forwarded chunk: the decoder keeps it (``usage``, normalized like
``WireFormat.usage``) and builds the OpenAI usage chunk (``usage_chunk``: ``choices: []`` and
``usage``) for the caller to send only when its client asked for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..routing import ProviderConfig
from .base import Endpoint, Pause, Usage

__all__ = ["SseEvent", "StreamDecoder", "StreamError", "StreamStep", "StreamingWire"]


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One Server-Sent Event: its ``event:`` name ("" when the event has none) and its ``data:`` lines
    joined by newlines."""

    event: str
    data: str


@dataclass(frozen=True, slots=True)
class StreamError:
    """A provider error reported inside a 200 stream (an OpenAI ``{"error": …}`` data line, an Anthropic
    ``event: error``, a Gemini error object), or a stream that was not a valid one.

    ``error_type`` is one of the contract's error types (as ``WireFormat.classify_error`` would type the
    same error as an HTTP answer: ``overloaded``, ``server_error``, ``rate_limited``, ``invalid_response``
    …); ``message`` is short and sanitised (safe to show the team); ``code`` is what the client's final
    ``data: {"error": {"message", "type", "code"}}`` event carries (the provider's own error type or
    code where it has one, else the error type)."""

    error_type: str
    message: str
    code: str
    pause: Pause | None = None  # the provider refuses everyone for a while (as ErrorVerdict.pause)


@dataclass(slots=True)
class StreamStep:
    """What one event means: OpenAI chunks to forward in order (never the usage-only chunk), an error,
    or the provider's end of the answer (``done``: ``[DONE]``, Anthropic ``message_stop``, Gemini's last
    candidate with a finish reason)."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    error: StreamError | None = None
    done: bool = False


class StreamDecoder(Protocol):
    """One stream's provider events → OpenAI chunks (one instance per stream)."""

    def feed(self, event: SseEvent) -> StreamStep:
        """The next event; events after ``done`` or an error are ignored (an empty step)."""
        ...

    @property
    def usage(self) -> Usage | None:
        """The normalized usage reported so far (USAGE_KEYS, clamped), None while none was."""
        ...

    def usage_chunk(self) -> dict[str, Any] | None:
        """The OpenAI usage chunk (``{"id", "object": "chat.completion.chunk", "created", "model",
        "choices": [], "usage": {...}}``) built from ``usage``; None while no usage was reported."""
        ...


class StreamingWire(Protocol):
    """What a wire format adds for streaming (every kind in gateway_engine.wire implements it)."""

    def stream_endpoint(self, config: ProviderConfig) -> Endpoint:
        """The streaming request's URL and headers (Gemini: ``:streamGenerateContent?alt=sse``)."""
        ...

    def stream_body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> Any:
        """``body`` with streaming on and the usage asked for (whatever the client's stream_options)."""
        ...

    def stream_decoder(self, config: ProviderConfig, *, completion_id: str, created: int) -> StreamDecoder:
        """A decoder for one stream; translated kinds name their chunks ``completion_id`` / ``created``
        (the OpenAI kinds keep the provider's own)."""
        ...

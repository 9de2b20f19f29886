"""The one error a stream's framing raises (an SSE event too large, a malformed AWS event stream):
gateway_engine.streaming turns it into an ``invalid_response`` stream error."""

from __future__ import annotations


class StreamFramingError(ValueError):
    """The bytes of a stream cannot be cut into events."""

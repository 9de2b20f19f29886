"""An incremental decoder of AWS's binary event stream (``application/vnd.amazon.eventstream``, the
framing of Bedrock's ConverseStream): raw response bytes in, ``SseEvent`` values out, so a kind's
stream decoder reads its events the same way whatever the framing (gateway_engine/wire/framing.py).

One message (https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html, the
same format as botocore's ``eventstream.py``)::

    total length (uint32 BE) | headers length (uint32 BE) | prelude CRC32 (of the 8 bytes before)
    headers: name length (uint8), name, value type (uint8), value  (repeated)
    payload
    message CRC32 (of everything before it)

Header value types: 0 true, 1 false, 2 byte, 3 int16, 4 int32, 5 int64, 6 bytes (uint16 length),
7 string (uint16 length), 8 timestamp (int64 ms), 9 UUID (16 bytes). A message's ``:message-type``
is ``event`` (its ``:event-type`` names it: ``messageStart``, ``contentBlockDelta`` …) or
``exception`` (``:exception-type``: ``throttlingException`` …) or ``error`` (``:error-code``); it
becomes ``SseEvent("event:messageStart", payload)``, ``SseEvent("exception:throttlingException",
payload)`` or ``SseEvent("error:CODE", message)``.

A wrong CRC, a length below the minimum or above ``max_message_bytes``, a header that runs past its
block, or bytes left over at the end raise ``EventStreamError`` (a ``StreamFramingError``: the stream is
an ``invalid_response``).
"""

from __future__ import annotations

import struct
import zlib

from .framing_errors import StreamFramingError
from .stream_base import SseEvent

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "EventStreamError", "EventStreamParser", "encode_message"]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # botocore's own limit on one message
PRELUDE = 12  # total length, headers length, prelude CRC
MINIMUM = PRELUDE + 4  # no headers, no payload, the message CRC
_FIXED = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}  # value type -> its size


class EventStreamError(StreamFramingError):
    """A malformed event stream (a bad CRC, a bad length, a truncated header, a message cut short)."""


def _headers(block: bytes) -> dict[str, object]:
    headers: dict[str, object] = {}
    at = 0
    try:
        while at < len(block):
            size = block[at]
            name = block[at + 1 : at + 1 + size].decode("utf-8")
            at += 1 + size
            kind = block[at]
            at += 1
            if kind in (0, 1):
                value: object = kind == 0
            elif kind in _FIXED:
                value = block[at : at + _FIXED[kind]]
                if len(value) != _FIXED[kind]:
                    raise EventStreamError(f"header {name!r} runs past the header block")
                at += _FIXED[kind]
            elif kind in (6, 7):
                (length,) = struct.unpack_from(">H", block, at)
                raw = block[at + 2 : at + 2 + length]
                if len(raw) != length:
                    raise EventStreamError(f"header {name!r} runs past the header block")
                value = raw.decode("utf-8") if kind == 7 else raw
                at += 2 + length
            else:
                raise EventStreamError(f"header {name!r} has unknown value type {kind}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise EventStreamError(f"malformed header block: {exc}") from None
    return headers


def _event(headers: dict[str, object], payload: bytes) -> SseEvent:
    message_type = headers.get(":message-type")
    text = payload.decode("utf-8", "replace")
    if message_type == "event":
        return SseEvent(f"event:{headers.get(':event-type', '')}", text)
    if message_type == "exception":
        return SseEvent(f"exception:{headers.get(':exception-type', '')}", text)
    if message_type == "error":
        return SseEvent(f"error:{headers.get(':error-code', '')}", str(headers.get(":error-message", "")))
    raise EventStreamError(f"unknown :message-type {message_type!r}")


class EventStreamParser:
    """One stream's decoder (not thread-safe; one instance per stream); the SseParser interface."""

    __slots__ = ("max_message_bytes", "_buf")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events of the messages completed by ``chunk``, in order."""
        self._buf += chunk
        events: list[SseEvent] = []
        while len(self._buf) >= PRELUDE:
            total, header_length, prelude_crc = struct.unpack_from(">III", self._buf, 0)
            if zlib.crc32(bytes(self._buf[:8])) != prelude_crc:
                raise EventStreamError("event stream prelude CRC mismatch")
            if total < MINIMUM or total > self.max_message_bytes or header_length > total - MINIMUM:
                raise EventStreamError(f"event stream message of {total} bytes (headers {header_length})")
            if len(self._buf) < total:
                break
            message = bytes(self._buf[:total])
            del self._buf[:total]
            (message_crc,) = struct.unpack_from(">I", message, total - 4)
            if zlib.crc32(message[:-4]) != message_crc:
                raise EventStreamError("event stream message CRC mismatch")
            headers = _headers(message[PRELUDE : PRELUDE + header_length])
            events.append(_event(headers, message[PRELUDE + header_length : -4]))
        return events

    def close(self) -> list[SseEvent]:
        """The end of the stream: bytes of an unfinished message are an error."""
        if self._buf:
            left, self._buf = len(self._buf), bytearray()
            raise EventStreamError(f"event stream ended inside a message ({left} bytes left)")
        return []


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One message with string headers (what the tests and fixtures build; the simulator has its own)."""
    block = b"".join(
        bytes([len(n.encode())]) + n.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for n, v in headers.items()
    )
    total = PRELUDE + len(block) + len(payload) + 4
    prelude = struct.pack(">II", total, len(block))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + block + payload
    return head + struct.pack(">I", zlib.crc32(head))

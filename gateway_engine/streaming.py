"""An upstream answer that streams (the interactive lane's ``stream: true``): opened by
``gateway_engine.http`` (``open_stream``), read here chunk by chunk, and summed up as an HttpOutcome
when it ends.

``UpstreamStream.chunks()`` yields OpenAI ``chat.completion.chunk`` objects (the provider's wire format
decodes its events: ``gateway_engine.wire.stream_base``) until the provider's end marker, an in-stream
error, a cut connection or an idle gap longer than the provider's ``timeout_seconds``; ``final()`` is
the attempt's outcome then — ok with the reported usage, or the error — with the answer assembled as a
``chat.completion`` (text and finish reason) for the records. ``aclose()`` closes the connection
(aborting the upstream call if it has not ended).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import aiohttp

from .answers import clean_text, without_secret
from .retry import ErrorType
from .wire.framing import StreamFramingError, StreamParser
from .wire.stream_base import StreamDecoder, StreamError, StreamStep

if TYPE_CHECKING:
    from .outcomes import HttpOutcome

__all__ = ["CLIENT_GONE", "UpstreamStream", "assemble", "final_outcome"]

# the outcome of a stream its client left before the end (not the provider's fault: no breaker failure)
CLIENT_GONE = StreamError(
    ErrorType.CANCELLED, "the client disconnected before the end of the stream", "cancelled"
)


class UpstreamStream:
    """One open 200 event stream from a provider (its first chunks already decoded)."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        parser: StreamParser,
        decoder: StreamDecoder,
        *,
        pending: list[dict[str, Any]],
        done: bool,
        idle_timeout: float,
        started: float,
        status: int,
        headers: dict[str, str],
        secret: str = "",
    ) -> None:
        self._response = response
        self._secret = secret  # the key the request carried: taken out of every event read
        self._parser = parser
        self.decoder = decoder
        self._pending = pending
        self.done = done  # the provider's end marker was read
        self.error: StreamError | None = None
        self._idle = idle_timeout
        self.started = started
        self.status = status
        self.headers = headers
        self.chunks_read = 0
        self._text: list[str] = []
        self._finish: str | None = None
        self._ids: tuple[str, str, int] = ("", "", 0)  # id, model, created of the first chunk

    async def first_step(self) -> StreamError | None:
        """Read until the first chunks are in (kept for ``chunks``), the end marker or an error; the
        error if one came before any chunk (the attempt failed before the client saw a byte). The
        caller bounds it with the provider's timeout."""
        while not self._pending and not self.done and self.error is None:
            data = await self._read()
            if data is None:
                break
            for event in self._events(data):
                step = self.decoder.feed(event)
                self._pending.extend(step.chunks)
                if self._ended(step):
                    break
        if self._pending:
            return None
        if self.error is None and not self.done:  # ended before any event at all
            self.error = StreamError(
                ErrorType.INVALID_RESPONSE, "the stream ended before any event", "stream_cut"
            )
        return self.error

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """The OpenAI chunks, in order, until the stream ends (``done`` or ``error`` set then)."""
        try:
            for chunk in self._pending:
                yield self._seen(chunk)
            self._pending = []
            while not self.done and self.error is None:
                data = await self._read()
                if data is None:
                    break
                for event in self._events(data):
                    step = self.decoder.feed(event)
                    for chunk in step.chunks:
                        yield self._seen(chunk)
                    if self._ended(step):
                        break
        finally:
            if not self.done:
                self._response.close()  # not finished: abort the upstream call

    async def _read(self) -> bytes | None:
        """The next bytes (None when the stream ended: the error is set unless the end marker came)."""
        try:
            async with asyncio.timeout(self._idle):
                data = await self._response.content.readany()
        except TimeoutError:
            self.error = StreamError(ErrorType.TIMEOUT, f"no stream event within {self._idle:g} s", "timeout")
            return None
        except (aiohttp.ClientError, OSError) as exc:
            message = clean_text(f"stream broken: {type(exc).__name__}")[:200]
            self.error = StreamError(ErrorType.CONNECTION_ERROR, message, "connection_error")
            return None
        if not data:  # the provider closed the stream
            for event in self._events(b"", last=True):
                if self._ended(self.decoder.feed(event)):
                    return None
            if not self.done and self.error is None:
                self.error = StreamError(
                    ErrorType.CONNECTION_ERROR,
                    "the stream ended before the provider's end marker",
                    "stream_cut",
                )
            return None
        return without_secret(data, self._secret)

    def _events(self, data: bytes, *, last: bool = False) -> list[Any]:
        try:
            return self._parser.close() if last else self._parser.feed(data)
        except StreamFramingError as exc:
            self.error = StreamError(ErrorType.INVALID_RESPONSE, str(exc), "invalid_response")
            return []

    def _ended(self, step: StreamStep) -> bool:
        if step.error is not None:
            self.error = step.error
            return True
        if step.done:
            self.done = True
            return True
        return self.error is not None

    def _seen(self, chunk: dict[str, Any]) -> dict[str, Any]:
        """Note what the answer says so far (text, finish reason) and pass the chunk on."""
        self.chunks_read += 1
        if not self._ids[0]:
            self._ids = (
                str(chunk.get("id", "")),
                str(chunk.get("model", "")),
                int(chunk.get("created") or 0),
            )
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                delta = choice.get("delta") or {}
                text = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(text, str):
                    self._text.append(text)
                if choice.get("finish_reason"):
                    self._finish = str(choice["finish_reason"])
        return chunk

    def assembled(self) -> dict[str, Any]:
        """The answer so far as a ``chat.completion`` (text and finish reason; for the records)."""
        return assemble(self._ids, "".join(self._text), self._finish, self.decoder.usage)

    async def aclose(self) -> None:
        """Close the connection now (aborting the upstream call if it is still sending)."""
        if not self.done:
            self._response.close()
        else:
            self._response.release()

    def latency_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


def assemble(
    ids: tuple[str, str, int], text: str, finish: str | None, usage: dict[str, int] | None
) -> dict[str, Any]:
    """A ``chat.completion`` object from a stream's pieces."""
    answer: dict[str, Any] = {
        "id": ids[0],
        "object": "chat.completion",
        "created": ids[2],
        "model": ids[1],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
    }
    if usage is not None:
        answer["usage"] = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return answer


def final_outcome(
    stream: UpstreamStream, *, client_gone: bool = False, estimate: dict[str, int] | None = None
) -> HttpOutcome:
    """The attempt's outcome once its stream is over: ok with the reported usage after the provider's
    end marker; the in-stream error (or the cut, the idle timeout) otherwise, with whatever usage was
    reported; a client gone before the end → ``cancelled``, settled at the ``estimate`` (the provider
    bills the tokens it produced, which nobody reported)."""
    from .outcomes import HttpOutcome  # outcomes imports nothing of this module; kept local anyway

    latency, usage = stream.latency_ms(), stream.decoder.usage
    if client_gone and not stream.done:
        error: StreamError | None = CLIENT_GONE
        usage = estimate if usage is None or "total_tokens" not in usage else usage
    else:
        error = stream.error
    body = stream.assembled()
    if error is None:
        return HttpOutcome(stream.status, latency, body=body, headers=stream.headers, usage=usage)
    return HttpOutcome(
        stream.status,
        latency,
        body=body,
        error_type=error.error_type,
        message=error.message,
        headers=stream.headers,
        usage=usage if usage and "total_tokens" in usage else None,
        detail=f"stream ended after {stream.chunks_read} chunk(s): {error.code}",
        pause=error.pause,
    )

"""The Bedrock ConverseStream (``/converse-stream``) translated into OpenAI ``chat.completion.chunk`` objects.

The stream is AWS's binary event stream (``wire.eventstream`` turns each message into an ``SseEvent``
named ``event:<type>`` / ``exception:<type>``; https://docs.aws.amazon.com/bedrock/latest/APIReference/
API_runtime_ConverseStream.html): ``messageStart{role}`` → the first chunk, ``delta: {"role":
"assistant", "content": ""}``; ``contentBlockDelta{contentBlockIndex, delta{text}}`` → ``delta.content``
(tool-use and reasoning deltas are left out: the kind is text only); ``contentBlockStart`` /
``contentBlockStop`` carry nothing for text; ``messageStop{stopReason}`` → the last chunk, ``delta: {}``
with the finish_reason ``wire.bedrock`` maps it to; ``metadata{usage, metrics}`` (after messageStop) →
the usage, and the stream is done. An exception message (``throttlingException``,
``modelStreamErrorException`` …) is typed as ``classify_error`` types the same error as an HTTP answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import ErrorVerdict, Usage
from .stream_base import SseEvent, StreamError, StreamStep
from .stream_shape import ChunkWriter, event_object, failed, invalid, role_delta, stream_error

ReadUsage = Callable[[Any], Usage | None]
Classify = Callable[[int, Any], ErrorVerdict]
FinishReason = Callable[[Any], str]
# in-stream exceptions (ConverseStreamOutput's error members) -> the status their HTTP answer has
EXCEPTION_STATUS = {
    "throttlingException": 429,
    "serviceUnavailableException": 503,
    "internalServerException": 500,
    "modelStreamErrorException": 424,
    "validationException": 400,
}


class BedrockStreamDecoder:
    """One ConverseStream (implements ``wire.stream_base.StreamDecoder``)."""

    __slots__ = ("_classify", "_ended", "_finish", "_read_usage", "_started", "_stopped", "_usage", "writer")

    def __init__(
        self,
        read_usage: ReadUsage,
        classify: Classify,
        finish: FinishReason,
        *,
        completion_id: str,
        created: int,
        model: str = "",
    ) -> None:
        self._read_usage, self._classify, self._finish = read_usage, classify, finish
        self.writer = ChunkWriter(completion_id, created, model)
        self._usage: Usage | None = None
        self._started = self._stopped = self._ended = False

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def usage_chunk(self) -> dict[str, Any] | None:
        return self.writer.usage_chunk(self._usage)

    def feed(self, event: SseEvent) -> StreamStep:
        if self._ended:
            return StreamStep()
        kind, _, name = event.event.partition(":")
        if kind == "error":
            return self._fail(invalid(f"event stream error {name or 'without a code'}"))
        body = event_object(event)
        if isinstance(body, StreamError):
            return self._fail(body)
        if kind == "exception":
            status = EXCEPTION_STATUS.get(name, 500)
            return self._fail(stream_error(self._classify(status, body), name))
        return self._event(name, body)

    def _event(self, name: str, body: dict[str, Any]) -> StreamStep:
        chunks: list[dict[str, Any]] = []
        if not self._started and name in ("messageStart", "contentBlockDelta", "messageStop"):
            self._started = True
            chunks.append(self.writer.chunk(0, role_delta()))
        if name == "contentBlockDelta":
            delta = body.get("delta")
            text = delta.get("text") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                chunks.append(self.writer.chunk(0, {"content": text}))
        elif name == "messageStop":
            self._stopped = True
            chunks.append(self.writer.chunk(0, {}, self._finish(body.get("stopReason"))))
        elif name == "metadata":
            usage = self._read_usage(body)
            if usage is not None:
                self._usage = usage
            self._ended = self._stopped
            return StreamStep(chunks, done=self._ended)
        return StreamStep(chunks)

    def _fail(self, error: StreamError) -> StreamStep:
        self._ended = True
        return failed(error)

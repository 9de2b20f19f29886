"""The Anthropic Messages stream (``"stream": true``) translated into OpenAI ``chat.completion.chunk``
objects (https://docs.anthropic.com/en/docs/build-with-claude/streaming).

Events: ``message_start`` (the model, ``usage``: input and cache counts) → the first chunk,
``delta: {"role": "assistant", "content": ""}``; per content block a ``content_block_start``, its
``content_block_delta`` events and a ``content_block_stop``: ``text_delta`` → ``delta.content``; a
``tool_use`` block → ``delta.tool_calls`` (its index among the answer's calls, id, ``type: function``,
the name, then each ``input_json_delta.partial_json`` as an ``arguments`` piece; ``"{}"`` for a call
whose input streamed no piece); thinking, signature and citation deltas are left out (as the
non-stream translation leaves thinking blocks out). ``message_delta`` (``stop_reason``, cumulative
``usage``) → the last chunk, ``delta: {}`` with the finish_reason ``wire.anthropic`` maps the
stop_reason to; ``message_stop`` → done. ``ping`` and event types added later are skipped.

``event: error`` (``{"type": "error", "error": {"type": "overloaded_error", "message": …}}``) is typed
as ``classify_error`` types the same error as an HTTP answer (its status per error type:
https://docs.anthropic.com/en/api/errors); the usage is ``parse_usage`` of the counts reported so
far (prompt = input + cache reads + cache writes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import ErrorVerdict, Usage
from .stream_base import SseEvent, StreamError, StreamStep
from .stream_shape import (
    ChunkWriter,
    event_object,
    failed,
    role_delta,
    stream_error,
    tool_call_arguments,
    tool_call_start,
)

ReadUsage = Callable[[Any], Usage | None]
Classify = Callable[[int, Any], ErrorVerdict]
FinishReason = Callable[[Any, bool], str]

# https://docs.anthropic.com/en/api/errors: the HTTP status each error type comes with
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicStreamDecoder:
    """One Messages stream (implements ``wire.stream_base.StreamDecoder``): ``read_usage``,
    ``classify`` and ``finish`` are ``wire.anthropic``'s ``parse_usage``, ``classify_error`` and
    ``finish_reason``; ``model`` names the chunks until ``message_start`` names the provider's."""

    __slots__ = (
        "_calls",
        "_classify",
        "_ended",
        "_finish",
        "_finished",
        "_raw_usage",
        "_read_usage",
        "_started",
        "_tools",
        "_usage",
        "writer",
    )

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
        self._raw_usage: dict[str, Any] = {}
        self._usage: Usage | None = None
        self._tools: dict[Any, list[Any]] = {}  # content block index → [call index, arguments sent]
        self._calls = 0
        self._started = self._finished = self._ended = False

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def usage_chunk(self) -> dict[str, Any] | None:
        return self.writer.usage_chunk(self._usage)

    def feed(self, event: SseEvent) -> StreamStep:
        if self._ended:
            return StreamStep()
        body = event_object(event)
        if isinstance(body, StreamError):
            return self._fail(body)
        kind = body.get("type")
        kind = kind if isinstance(kind, str) else event.event
        if kind == "content_block_delta":
            return StreamStep(self._delta(body))
        if kind == "content_block_start":
            return StreamStep(self._block_start(body))
        if kind == "content_block_stop":
            return StreamStep(self._block_stop(body))
        if kind == "message_start":
            return StreamStep(self._message_start(body))
        if kind == "message_delta":
            return StreamStep(self._message_delta(body))
        if kind == "message_stop":
            self._ended = True
            return StreamStep(self._finish_chunk(None), done=True)
        if kind == "error":
            err = body.get("error")
            kind_of = err.get("type") if isinstance(err, dict) else None
            status = ERROR_STATUS.get(kind_of, 500) if isinstance(kind_of, str) else 500
            return self._fail(stream_error(self._classify(status, body), kind_of))
        return StreamStep()  # ping, and event types added later

    def _fail(self, error: StreamError) -> StreamStep:
        self._ended = True
        return failed(error)

    def _open(self) -> list[dict[str, Any]]:
        """The role chunk, once, before anything else of the answer."""
        if self._started:
            return []
        self._started = True
        return [self.writer.chunk(0, role_delta())]

    def _add_usage(self, raw: Any) -> None:
        if isinstance(raw, dict):
            self._raw_usage.update((k, v) for k, v in raw.items() if v is not None)
            self._usage = self._read_usage({"usage": self._raw_usage})

    def _message_start(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        message = body.get("message")
        if isinstance(message, dict):
            if isinstance(message.get("model"), str):
                self.writer.model = message["model"]
            self._add_usage(message.get("usage"))
        return self._open()

    def _block_start(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        block = body.get("content_block")
        kind = block.get("type") if isinstance(block, dict) else None
        if (
            kind == "text"
            and isinstance(block, dict)
            and isinstance(block.get("text"), str)
            and block["text"]
        ):
            return self._open() + [self.writer.chunk(0, {"content": block["text"]})]
        if kind != "tool_use" or not isinstance(block, dict) or not isinstance(block.get("name"), str):
            return []  # thinking, redacted thinking, server tools: left out
        call, self._calls = self._calls, self._calls + 1
        call_id = str(block.get("id") or f"toolu_{body.get('index', call)}")
        self._tools[body.get("index")] = [call, False]
        start = tool_call_start(call, call_id, block["name"])
        return self._open() + [self.writer.chunk(0, {"tool_calls": [start]})]

    def _delta(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        delta = body.get("delta")
        kind = delta.get("type") if isinstance(delta, dict) else None
        if kind == "text_delta" and isinstance(delta, dict):
            text = delta.get("text")
            if isinstance(text, str) and text:
                return self._open() + [self.writer.chunk(0, {"content": text})]
        elif kind == "input_json_delta" and isinstance(delta, dict):
            tool = self._tools.get(body.get("index"))
            piece = delta.get("partial_json")
            if tool is not None and isinstance(piece, str) and piece:
                tool[1] = True
                return [self.writer.chunk(0, {"tool_calls": [tool_call_arguments(tool[0], piece)]})]
        return []  # thinking, signature and citation deltas: left out

    def _block_stop(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        tool = self._tools.get(body.get("index"))
        if tool is None or tool[1]:
            return []
        tool[1] = True  # a call whose input streamed no piece: its arguments are the empty object
        return [self.writer.chunk(0, {"tool_calls": [tool_call_arguments(tool[0], "{}")]})]

    def _message_delta(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        self._add_usage(body.get("usage"))
        delta = body.get("delta")
        stop = delta.get("stop_reason") if isinstance(delta, dict) else None
        return self._finish_chunk(stop) if stop else []

    def _finish_chunk(self, stop: Any) -> list[dict[str, Any]]:
        """The last chunk (once): ``delta: {}`` and the finish_reason of ``stop``."""
        if self._finished:
            return []
        self._finished = True
        return self._open() + [self.writer.chunk(0, {}, self._finish(stop, self._calls > 0))]

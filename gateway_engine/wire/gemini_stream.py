"""The Gemini stream (``:streamGenerateContent?alt=sse``) translated into OpenAI ``chat.completion.chunk``
objects.

Each ``data:`` is a whole ``GenerateContentResponse`` (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent,
https://ai.google.dev/gemini-api/docs/text-generation#streaming-responses): ``candidates[]`` with the
next ``content.parts`` (text; a ``functionCall`` arrives whole), ``finishReason`` on a candidate's last
chunk, ``usageMetadata`` (the counts so far; the last one is the answer's), ``modelVersion``. There is no
``[DONE]``: the stream is done once every candidate seen has finished.

Per candidate (its ``index`` is the OpenAI choice index): a first chunk ``delta: {"role": "assistant",
"content": ""}``, each response's text as ``delta.content`` (thought parts left out, as the non-stream
translation leaves them out), each function call as one whole ``delta.tool_calls`` entry (index among
the candidate's calls, the call's id or ``call_{candidate}_{n}``, ``type: function``, name, arguments
as a JSON string), and on ``finishReason`` a chunk ``delta: {}`` with the finish_reason ``wire.gemini``
maps it to. A response with ``error`` is typed as ``classify_error`` types it (its ``code`` is the HTTP
status); one with no candidates and ``promptFeedback.blockReason`` is the blocked prompt
``read_answer`` refuses (client_error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import ErrorVerdict, Usage
from .chat_shape import tool_call
from .stream_base import SseEvent, StreamError, StreamStep
from .stream_shape import ChunkWriter, event_object, failed, role_delta, stream_error

ReadUsage = Callable[[Any], Usage | None]
Classify = Callable[[int, Any], ErrorVerdict]
FinishReason = Callable[[Any, bool], str]
Blocked = Callable[[Any], ErrorVerdict | None]


class GeminiStreamDecoder:
    """One Gemini stream (implements ``wire.stream_base.StreamDecoder``): ``read_usage``, ``classify``,
    ``finish`` and ``blocked`` are ``wire.gemini``'s ``parse_usage``, ``classify_error``,
    ``finish_reason`` and ``blocked_prompt``; ``model`` names the chunks until a response names its
    ``modelVersion``."""

    __slots__ = (
        "_blocked",
        "_calls",
        "_classify",
        "_ended",
        "_finish",
        "_finished",
        "_read_usage",
        "_usage",
        "writer",
    )

    def __init__(
        self,
        read_usage: ReadUsage,
        classify: Classify,
        finish: FinishReason,
        blocked: Blocked,
        *,
        completion_id: str,
        created: int,
        model: str = "",
    ) -> None:
        self._read_usage, self._classify, self._finish, self._blocked = read_usage, classify, finish, blocked
        self.writer = ChunkWriter(completion_id, created, model)
        self._usage: Usage | None = None
        self._calls: dict[int, int] = {}  # candidate index → its function calls so far (seen: a key)
        self._finished: set[int] = set()
        self._ended = False

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
        err = body.get("error")
        if err:
            return self._fail(self._error(body, err))
        usage = self._read_usage(body)
        if usage is not None:
            self._usage = usage
        if isinstance(body.get("modelVersion"), str):
            self.writer.model = body["modelVersion"]
        candidates = body.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            blocked = self._blocked(body)
            if blocked is None:
                return StreamStep()  # usage only
            feedback = body.get("promptFeedback")
            return self._fail(
                stream_error(blocked, feedback.get("blockReason") if isinstance(feedback, dict) else None)
            )
        chunks: list[dict[str, Any]] = []
        for i, candidate in enumerate(candidates):
            if isinstance(candidate, dict):
                index = candidate.get("index", i)
                chunks += self._candidate(index if type(index) is int else i, candidate)
        self._ended = bool(self._calls) and self._finished.issuperset(self._calls)
        return StreamStep(chunks, done=self._ended)

    def _fail(self, error: StreamError) -> StreamStep:
        self._ended = True
        return failed(error)

    def _error(self, body: dict[str, Any], err: Any) -> StreamError:
        status = err.get("code") if isinstance(err, dict) else None
        status = status if type(status) is int and 400 <= status <= 599 else 500
        code = err.get("status") if isinstance(err, dict) else None
        return stream_error(self._classify(status, body), code)

    def _candidate(self, index: int, candidate: dict[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if index not in self._calls:
            self._calls[index] = 0
            out.append(self.writer.chunk(index, role_delta()))
        if index in self._finished:
            return out
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict) or part.get("thought") is True:
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part.get("functionCall"), dict) and isinstance(
                part["functionCall"].get("name"), str
            ):
                calls.append(self._call(index, part["functionCall"]))
        text = "".join(texts)
        if text:
            out.append(self.writer.chunk(index, {"content": text}))
        if calls:
            out.append(self.writer.chunk(index, {"tool_calls": calls}))
        reason = candidate.get("finishReason")
        if isinstance(reason, str) and reason:
            self._finished.add(index)
            out.append(self.writer.chunk(index, {}, self._finish(reason, self._calls[index] > 0)))
        return out

    def _call(self, index: int, call: dict[str, Any]) -> dict[str, Any]:
        n = self._calls[index]
        self._calls[index] = n + 1
        return {
            "index": n,
            **tool_call(str(call.get("id") or f"call_{index}_{n}"), call["name"], call.get("args")),
        }

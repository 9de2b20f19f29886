"""The OpenAI kinds' streams (``openai``, ``azure_openai``): the provider's ``chat.completion.chunk``
objects are already what the client reads, so they pass through as they come.

https://platform.openai.com/docs/api-reference/chat-streaming/streaming (the chunk object):
``data: {chunk}`` lines, then ``data: [DONE]``; with ``stream_options.include_usage`` every chunk has
``"usage": null`` except one last chunk before ``[DONE]`` with ``"choices": []`` and the usage. An error
inside the stream is a data line ``{"error": {"message", "type", "code"}}``.

Here: a content chunk is forwarded without its ``usage`` field (a count some compatible servers put on
the last content chunk is still read); a chunk with no choices is never forwarded: the usage chunk is
held (``usage``, ``usage_chunk``) and anything else (Azure's ``prompt_filter_results`` chunk) dropped.

Azure (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-streaming) also sends
annotation chunks, named ``"id": ""``, whose choices carry ``content_filter_results`` and no ``delta``:
a choice without a delta is dropped, unless it has a ``finish_reason`` (``content_filter``: the output
was filtered), which passes through with ``delta: {}`` and the stream's id, created and model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .base import ErrorVerdict, Usage
from .stream_base import SseEvent, StreamError, StreamStep
from .stream_shape import CHUNK, event_object, failed, stream_error

ReadUsage = Callable[[Any], Usage | None]
Classify = Callable[[int, Any], ErrorVerdict]
_RATE_WORDS = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "requests", "tokens", "insufficient_quota"}
)


def streaming_body(body: dict[str, Any], params: Mapping[str, Any] | None) -> dict[str, Any]:
    """An OpenAI body with streaming on and the usage asked for (the item's other stream_options kept)."""
    asked = (params or {}).get("stream_options")
    options = {**asked} if isinstance(asked, dict) else {}
    options["include_usage"] = True
    return {**body, "stream": True, "stream_options": options}


def error_status(err: Any) -> int:
    """The HTTP status the same error would have come with: its own numeric status or code (a number or
    Azure's ``"429"``), 429 for a rate or quota error, 400 for an invalid request, else 500 (a failure
    while answering)."""
    if not isinstance(err, dict):
        return 500
    for key in ("status", "code"):
        value = err.get(key)  # Azure's codes are strings: "429"
        status = int(value) if isinstance(value, str) and value.isdigit() and len(value) == 3 else value
        if type(status) is int and 400 <= status <= 599:
            return status
    words = {err.get("type"), err.get("code")}
    if words & _RATE_WORDS:
        return 429
    return 400 if "invalid_request_error" in words else 500


def error_code(err: Any) -> Any:
    """The provider's own code (or type) of an error object."""
    if not isinstance(err, dict):
        return None
    code = err.get("code")
    return code if isinstance(code, str) and code else err.get("type")


class OpenAIStreamDecoder:
    """One OpenAI-kind stream (implements ``wire.stream_base.StreamDecoder``): ``read_usage`` and
    ``classify`` are the kind's ``usage`` and ``classify_error``; ``completion_id``, ``created`` and
    ``model`` (the provider's) name an Azure filter verdict sent before any chunk named the stream."""

    __slots__ = ("_classify", "_created", "_ended", "_id", "_model", "_read_usage", "_usage", "_usage_chunk")

    def __init__(
        self, read_usage: ReadUsage, classify: Classify, *, completion_id: str, created: int, model: str = ""
    ) -> None:
        self._read_usage, self._classify = read_usage, classify
        self._id, self._created, self._model = completion_id, created, model
        self._ended = False
        self._usage: Usage | None = None
        self._usage_chunk: dict[str, Any] | None = None

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def usage_chunk(self) -> dict[str, Any] | None:
        """The provider's own usage chunk (or one carrying the usage a content chunk reported)."""
        return self._usage_chunk

    def feed(self, event: SseEvent) -> StreamStep:
        if self._ended:
            return StreamStep()
        if event.data.startswith("[DONE]"):  # as the OpenAI SDK reads it
            self._ended = True
            return StreamStep(done=True)
        body = event_object(event)
        if isinstance(body, StreamError):
            return self._fail(body)
        err = body.get("error")
        if err:
            return self._fail(stream_error(self._classify(error_status(err), body), error_code(err)))
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            if isinstance(body.get("usage"), dict):
                self._usage, self._usage_chunk = self._read_usage(body), body
            return StreamStep()  # the usage chunk is held; Azure's prompt_filter_results chunk dropped
        return self._content(body, choices)

    def _fail(self, error: StreamError) -> StreamStep:
        self._ended = True
        return failed(error)

    def _content(self, body: dict[str, Any], choices: list[Any]) -> StreamStep:
        usage = body.pop("usage", None)
        if any(not isinstance(c, dict) or "delta" not in c for c in choices):
            choices = body["choices"] = [_with_delta(c) for c in choices if _forwarded(c)]
            if not choices:
                return StreamStep()  # an Azure annotation: no tokens, no verdict
        if body.get("id"):  # the names an Azure verdict chunk will take
            self._id, self._model = body["id"], body.get("model", self._model)
            self._created = body.get("created", self._created)
        else:  # an Azure filter verdict: named like the stream's chunks
            body.update(id=self._id, object=CHUNK, created=self._created, model=self._model)
        if isinstance(usage, dict):
            self._usage = self._read_usage({"usage": usage})
            named = {k: body.get(k) for k in ("id", "object", "created", "model")}
            self._usage_chunk = {**named, "choices": [], "usage": usage}
        return StreamStep(chunks=[body])


def _forwarded(choice: Any) -> bool:
    return isinstance(choice, dict) and ("delta" in choice or bool(choice.get("finish_reason")))


def _with_delta(choice: dict[str, Any]) -> dict[str, Any]:
    return choice if "delta" in choice else {**choice, "delta": {}}

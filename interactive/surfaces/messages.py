"""``POST /v1/messages``: Anthropic's Messages API on the chat path, so the ``anthropic`` SDK works with
``base_url`` the gateway. The request is translated by messages_request.py; here the chat answer becomes
a ``message`` object (content ``text`` and ``tool_use`` blocks; ``stop_reason`` from the finish reason:
stop → ``end_turn``, length → ``max_tokens``, tool_calls → ``tool_use``, content_filter → ``refusal``;
``usage`` {input_tokens (the uncached part), output_tokens, cache_read_input_tokens,
cache_creation_input_tokens}), the chat chunks Anthropic's event stream
(https://docs.anthropic.com/en/docs/build-with-claude/streaming: ``message_start``, ``ping``, per block
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``) /
``content_block_stop``, ``message_delta`` with the stop reason and the usage, ``message_stop``; an upstream
failure after the stream began: ``event: error``), and the call's errors Anthropic's error object
``{"type": "error", "error": {"type", "message"}}``.

The error's Anthropic type follows from the HTTP status the gateway's one table gives each error type
(gateway_engine.error_kinds, read through interactive.errors): 400 ``invalid_request_error``, 401
``authentication_error``, 403 ``permission_error``, 404 ``not_found_error``, 413 ``request_too_large``,
429 ``rate_limit_error``, 503 (a provider overloaded, no provider available, a dependency down) 529
``overloaded_error`` (the status the anthropic SDK retries as ``OverloadedError``), any other 5xx
``api_error``. A stop at one of ``stop_sequences`` is reported as ``end_turn`` (the chat answer does not
say which stop it met)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.http import HttpResponse, JsonResponse

from gateway_engine.error_kinds import error_kind

from ..errors import CallError
from . import messages_request
from .base import Answered, ChatRequest, chat_usage, first_choice, first_choice_deltas, renamed, sse

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                "function_call": "tool_use", "content_filter": "refusal"}  # fmt: skip
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}  # fmt: skip
OVERLOADED_STATUS = 529


def anthropic_error(status: int) -> tuple[int, str]:
    """(status, Anthropic error type) of a gateway answer's HTTP status."""
    if status == 503:
        return OVERLOADED_STATUS, "overloaded_error"
    if status >= 500:
        return status, "api_error"
    return status, ERROR_TYPES.get(status, "invalid_request_error")


def error_body(error: CallError) -> tuple[int, dict[str, Any]]:
    status, kind = anthropic_error(error.status)
    return status, {"type": "error", "error": {"type": kind, "message": error.message}}


def usage_object(chat: Mapping[str, Any], cache_write_tokens: int = 0) -> dict[str, int]:
    prompt, completion, cached = chat_usage(chat)
    return {"input_tokens": max(0, prompt - cached - cache_write_tokens), "output_tokens": completion,
            "cache_read_input_tokens": cached, "cache_creation_input_tokens": cache_write_tokens}  # fmt: skip


def _input(arguments: Any) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def from_chat(
    call_id: str, model: str, chat: Mapping[str, Any], cache_write_tokens: int = 0
) -> dict[str, Any]:
    """The ``message`` object of a chat answer."""
    message, finish = first_choice(chat)
    calls = message.get("tool_calls") or []
    text = message.get("content") or message.get("refusal") or ""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text or not calls else []
    for call in calls:
        fn = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"),
                        "input": _input(fn.get("arguments"))})  # fmt: skip
    return {"id": call_id, "type": "message", "role": "assistant", "model": str(chat.get("model") or model),
            "content": content, "stop_reason": STOP_REASONS.get(finish or "stop", "end_turn"),
            "stop_sequence": None, "usage": usage_object(chat, cache_write_tokens)}  # fmt: skip


class MessagesWriter:
    """Anthropic's event stream of one call, from its chat chunks."""

    def __init__(self, call_id: str, model: str) -> None:
        self.call_id, self.model = call_id, model
        self.started, self.finish = False, None
        self.blocks = 0  # content blocks opened so far
        self.open: int | None = None  # the block being written
        self.text_block: int | None = None
        self.tools: dict[int, int] = {}  # chat tool-call index → its block index

    def _event(self, name: str, **data: Any) -> bytes:
        return sse(name, {"type": name, **data})

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        message = {"id": self.call_id, "type": "message", "role": "assistant", "content": [], "model": self.model,
                   "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}  # fmt: skip
        return self._event("message_start", message=message) + self._event("ping")

    def _open(self, block: dict[str, Any]) -> tuple[int, bytes]:
        out = self._close()
        index, self.blocks = self.blocks, self.blocks + 1
        self.open = index
        return index, out + self._event("content_block_start", index=index, content_block=block)

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        index, self.open = self.open, None
        return self._event("content_block_stop", index=index)

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if chunk.get("model") and not self.started:
            self.model = str(chunk["model"])
        out = self._start()
        for delta, finish in first_choice_deltas(chunk):
            if isinstance(delta.get("content"), str) and delta["content"]:
                out += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                out += self._call(call)
            self.finish = finish or self.finish
        return out

    def _text(self, piece: str) -> bytes:
        out = b""
        if self.text_block is None or self.open != self.text_block:
            self.text_block, out = self._open({"type": "text", "text": ""})
        return out + self._event("content_block_delta", index=self.text_block,
                                 delta={"type": "text_delta", "text": piece})  # fmt: skip

    def _call(self, call: dict[str, Any]) -> bytes:
        out = b""
        fn = call.get("function") or {}
        position = call.get("index", 0)
        if position not in self.tools:
            block = {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": fn.get("name") or "",
                "input": {},
            }
            self.tools[position], out = self._open(block)
        piece = fn.get("arguments")
        if isinstance(piece, str) and piece:
            out += self._event("content_block_delta", index=self.tools[position],
                               delta={"type": "input_json_delta", "partial_json": piece})  # fmt: skip
        return out

    def done(self, usage_chunk: dict[str, Any] | None) -> bytes:
        out = self._start() + self._close()
        delta = {"stop_reason": STOP_REASONS.get(self.finish or "stop", "end_turn"), "stop_sequence": None}
        out += self._event("message_delta", delta=delta, usage=usage_object(usage_chunk or {}))
        return out + self._event("message_stop")

    def failed(self, error_type: str, message: str) -> bytes:
        _, kind = anthropic_error(error_kind(error_type).status)
        return self._start() + self._event("error", error={"type": kind, "message": message})

    def cut(self, code: str, message: str) -> bytes:
        return self._start() + self._event(
            "error", error={"type": "api_error", "message": f"{code}: {message}"}
        )


class MessagesSurface:
    endpoint = "messages"
    id_prefix = "msg_"

    def chat_request(self, body: dict[str, Any]) -> ChatRequest:
        return messages_request.chat_request(body)

    def param(self, chat_field: str) -> str:
        return renamed(chat_field, messages_request.FIELD_NAMES)

    def answer(self, answered: Answered) -> dict[str, Any]:
        return from_chat(answered.call_id, answered.model, answered.chat, answered.cache_write_tokens)

    def error_response(self, error: CallError) -> HttpResponse:
        status, body = error_body(error)
        response = JsonResponse(body, status=status)
        for name, value in error.headers.items():
            response[name] = value
        return response

    def stream_writer(self, call_id: str, model: str, echo: Mapping[str, Any]) -> MessagesWriter:
        return MessagesWriter(call_id, model)


MESSAGES = MessagesSurface()

"""``POST /v1/responses``: OpenAI's Responses API on the chat path. The request is translated by
responses_request.py; here the chat answer becomes a Response object (``id`` ``resp_…``, ``object:
"response"``, ``status``, ``output``: a ``message`` item with ``output_text`` and ``function_call`` items,
``usage`` {input_tokens, output_tokens, total_tokens}) and the chat chunks the Responses event stream
(https://platform.openai.com/docs/api-reference/responses-streaming): ``response.created``,
``response.in_progress``, per item ``response.output_item.added`` … ``response.output_item.done`` (a
message's ``content_part.added``, ``output_text.delta``, ``output_text.done``, ``content_part.done``; a
call's ``function_call_arguments.delta`` / ``.done``), then ``response.completed`` (``incomplete`` when
the answer stopped at max_output_tokens or a content filter; ``response.failed`` with the error when the
upstream failed after the stream began), each with its ``sequence_number``. Errors in OpenAI's shape."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

from django.http import HttpResponse

from gateway_engine.error_kinds import error_kind

from ..errors import CallError
from . import responses_request
from .base import Answered, ChatRequest, chat_usage, first_choice, first_choice_deltas, renamed, sse

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _item_id(call_id: str, prefix: str, n: int) -> str:
    return f"{prefix}_{hashlib.sha256(f'{call_id}/{n}'.encode()).hexdigest()[:32]}"


def usage_object(chat: Mapping[str, Any], cache_write_tokens: int = 0) -> dict[str, Any]:
    prompt, completion, cached = chat_usage(chat)
    return {"input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write_tokens},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}  # fmt: skip


def response_object(
    call_id: str, model: str, echo: Mapping[str, Any], output: list[dict[str, Any]], **state: Any
) -> dict[str, Any]:
    """A Response object; ``state``: status, usage, created_at, error, incomplete_details."""
    return {
        "id": call_id, "object": "response", "created_at": state.get("created_at") or int(time.time()),
        "status": state.get("status", "completed"), "error": state.get("error"),
        "incomplete_details": state.get("incomplete_details"), "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"), "metadata": echo.get("metadata", {}),
        "model": model, "output": output, "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "previous_response_id": None, "reasoning": None, "temperature": echo.get("temperature"),
        "text": echo.get("text", {"format": {"type": "text"}}), "tool_choice": echo.get("tool_choice", "auto"),
        "tools": echo.get("tools", []), "top_p": echo.get("top_p"), "truncation": "disabled",
        "usage": state.get("usage"), "user": echo.get("user"),
    }  # fmt: skip


def _finish_state(finish: str | None) -> dict[str, Any]:
    reason = _INCOMPLETE.get(finish or "")
    return {"status": "incomplete", "incomplete_details": {"reason": reason}} if reason else {}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def output_items(call_id: str, message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A chat answer's message as output items: the message (its text or refusal), then its calls."""
    items: list[dict[str, Any]] = []
    calls = message.get("tool_calls") or []
    text, refusal = message.get("content"), message.get("refusal")
    if refusal or text or not calls:
        part = {"type": "refusal", "refusal": refusal} if refusal else text_part(text or "")
        items.append({"id": _item_id(call_id, "msg", 0), "type": "message", "role": "assistant",
                      "status": "completed", "content": [part]})  # fmt: skip
    for n, call in enumerate(calls, start=1):
        fn = call.get("function") or {}
        items.append({"id": _item_id(call_id, "fc", n), "type": "function_call", "call_id": call.get("id"),
                      "name": fn.get("name"), "arguments": fn.get("arguments") or "{}",
                      "status": "completed"})  # fmt: skip
    return items


def from_chat(call_id: str, model: str, echo: Mapping[str, Any], chat: Mapping[str, Any],
              cache_write_tokens: int = 0) -> dict[str, Any]:  # fmt: skip
    """The Response object of a chat answer."""
    message, finish = first_choice(chat)
    return response_object(call_id, str(chat.get("model") or model), echo, output_items(call_id, message),
                           usage=usage_object(chat, cache_write_tokens), created_at=chat.get("created"),
                           **_finish_state(finish))  # fmt: skip


class ResponsesWriter:
    """The Responses event stream of one call, from its chat chunks."""

    def __init__(self, call_id: str, model: str, echo: Mapping[str, Any]) -> None:
        self.call_id, self.model, self.echo = call_id, model, echo
        self.seq, self.started, self.finish = 0, False, None
        self.created = int(time.time())
        self.output: list[dict[str, Any]] = []  # the items so far, by output_index
        self.text: dict[str, Any] | None = None  # the message item being written
        self.pieces: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}  # chat tool-call index → its function_call item

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse(kind, data)

    def _response(self, **state: Any) -> dict[str, Any]:
        return response_object(self.call_id, self.model, self.echo, self.output, created_at=self.created,
                               **state)  # fmt: skip

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        opened = self._response(status="in_progress")
        return self._event("response.created", response=opened) + self._event("response.in_progress",
                                                                              response=opened)  # fmt: skip

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if chunk.get("model") and not self.started:
            self.model = str(chunk["model"])
        out = self._start()
        for delta, finish in first_choice_deltas(chunk):
            if isinstance(delta.get("content"), str) and delta["content"]:
                out += self._text_piece(delta["content"])
            for call in delta.get("tool_calls") or ():
                out += self._call_piece(call)
            self.finish = finish or self.finish
        return out

    def _text_piece(self, piece: str) -> bytes:
        out = b""
        if self.text is None:
            self.text = {"id": _item_id(self.call_id, "msg", 0), "type": "message", "role": "assistant",
                         "status": "in_progress", "content": []}  # fmt: skip
            self.output.append(self.text)
            index = len(self.output) - 1
            out += self._event("response.output_item.added", output_index=index, item=dict(self.text))
            out += self._event("response.content_part.added", item_id=self.text["id"], output_index=index,
                               content_index=0, part=text_part(""))  # fmt: skip
        self.pieces.append(piece)
        return out + self._event("response.output_text.delta", item_id=self.text["id"],
                                 output_index=self.output.index(self.text), content_index=0, delta=piece,
                                 logprobs=[])  # fmt: skip

    def _call_piece(self, call: dict[str, Any]) -> bytes:
        out = b""
        index, fn = call.get("index", 0), call.get("function") or {}
        item = self.calls.get(index)
        if item is None:
            out += self._close_text()
            item = {"id": _item_id(self.call_id, "fc", len(self.calls) + 1), "type": "function_call",
                    "call_id": call.get("id") or "", "name": fn.get("name") or "", "arguments": "",
                    "status": "in_progress"}  # fmt: skip
            self.calls[index] = item
            self.output.append(item)
            out += self._event(
                "response.output_item.added", output_index=len(self.output) - 1, item=dict(item)
            )
        piece = fn.get("arguments")
        if isinstance(piece, str) and piece:
            item["arguments"] += piece
            out += self._event("response.function_call_arguments.delta", item_id=item["id"],
                               output_index=self.output.index(item), delta=piece)  # fmt: skip
        return out

    def _close_text(self) -> bytes:
        item = self.text
        if item is None or item["status"] == "completed":
            return b""
        index, part = self.output.index(item), text_part("".join(self.pieces))
        item["status"], item["content"] = "completed", [part]
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return (self._event("response.output_text.done", **ids, text=part["text"], logprobs=[])
                + self._event("response.content_part.done", **ids, part=part)
                + self._event("response.output_item.done", output_index=index, item=item))  # fmt: skip

    def _close_calls(self) -> bytes:
        out = b""
        for item in self.calls.values():
            if item["status"] == "completed":
                continue
            item["status"], item["arguments"] = "completed", item["arguments"] or "{}"
            index = self.output.index(item)
            out += self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                               arguments=item["arguments"])  # fmt: skip
            out += self._event("response.output_item.done", output_index=index, item=item)
        return out

    def done(self, usage_chunk: dict[str, Any] | None) -> bytes:
        out = self._start() + self._close_text() + self._close_calls()
        state = _finish_state(self.finish)
        final = self._response(usage=usage_object(usage_chunk or {}), **state)
        kind = "response.incomplete" if state else "response.completed"
        return out + self._event(kind, response=final)

    def failed(self, error_type: str, message: str) -> bytes:
        """``response.failed``: the Responses error codes have no gateway ones, so the code is
        ``rate_limit_exceeded`` or ``server_error`` by the error type's OpenAI type, its own code leads
        the message."""
        kind = error_kind(error_type)
        code = "rate_limit_exceeded" if kind.openai_type == "rate_limit_error" else "server_error"
        return self._failed(code, f"{kind.code}: {message}")

    def cut(self, code: str, message: str) -> bytes:
        return self._failed("server_error", f"{code}: {message}")

    def _failed(self, code: str, message: str) -> bytes:
        for item in self.output:  # what was streamed before the failure, cut short
            if item["status"] != "completed":
                item["status"] = "incomplete"
        if self.text is not None and self.text["status"] == "incomplete":
            self.text["content"] = [text_part("".join(self.pieces))]
        failed = self._response(status="failed", error={"code": code, "message": message})
        return self._start() + self._event("response.failed", response=failed)


class ResponsesSurface:
    endpoint = "responses"
    id_prefix = "resp_"

    def chat_request(self, body: dict[str, Any]) -> ChatRequest:
        return responses_request.chat_request(body)

    def param(self, chat_field: str) -> str:
        return renamed(chat_field, responses_request.FIELD_NAMES)

    def answer(self, answered: Answered) -> dict[str, Any]:
        return from_chat(answered.call_id, answered.model, answered.echo, answered.chat,
                         answered.cache_write_tokens)  # fmt: skip

    def error_response(self, error: CallError) -> HttpResponse:
        return error.response()

    def stream_writer(self, call_id: str, model: str, echo: Mapping[str, Any]) -> ResponsesWriter:
        return ResponsesWriter(call_id, model, echo)


RESPONSES = ResponsesSurface()

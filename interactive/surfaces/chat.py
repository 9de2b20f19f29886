"""``POST /v1/chat/completions``: the chat request as it is (the engine's own shape), the chat answer
as it comes, the chunks as OpenAI's ``data:`` events ending ``data: [DONE]``, errors in OpenAI's shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpResponse

from ..errors import CallError, stream_error_frame
from .base import Answered, ChatRequest, sse

DONE = b"data: [DONE]\n\n"
# what the request body carries that is not an item param: the gateway sets these itself
LANE_FIELDS = frozenset({"model", "messages", "stream", "stream_options"})


def _stream_fields(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise CallError(400, "stream: must be a boolean", param="stream", code="invalid_type")
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise CallError(400, "stream_options: only allowed when stream is true", param="stream_options",
                        code="invalid_value")  # fmt: skip
    if not isinstance(options, dict) or set(options) - {"include_usage", "include_obfuscation"}:
        raise CallError(400, "stream_options: must be an object with include_usage", param="stream_options",
                        code="invalid_value")  # fmt: skip
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise CallError(400, "stream_options.include_usage: must be a boolean",
                        param="stream_options.include_usage", code="invalid_type")  # fmt: skip
    return stream, include


class ChatWriter:
    """OpenAI's chunks as they come; the usage chunk only if the client asked for it."""

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        return sse(None, chunk)

    def done(self, usage_chunk: dict[str, Any] | None) -> bytes:
        head = sse(None, usage_chunk) if self.include_usage and usage_chunk is not None else b""
        return head + DONE

    def failed(self, error_type: str, message: str) -> bytes:
        return sse(None, stream_error_frame(error_type, message))

    def cut(self, code: str, message: str) -> bytes:
        return sse(None, {"error": {"message": message, "type": "server_error", "param": None, "code": code}})


class ChatSurface:
    endpoint = "chat"
    id_prefix = "chatcmpl-"

    def chat_request(self, body: dict[str, Any]) -> ChatRequest:
        stream, include_usage = _stream_fields(body)
        if "messages" not in body:
            raise CallError(400, "messages: required", param="messages", code="missing_required_parameter")
        params = {k: v for k, v in body.items() if k not in LANE_FIELDS}
        return ChatRequest(body["messages"], params, stream, include_usage, {"include_usage": include_usage})

    def param(self, chat_field: str) -> str:
        return chat_field

    def answer(self, answered: Answered) -> dict[str, Any]:
        return dict(answered.chat)

    def error_response(self, error: CallError) -> HttpResponse:
        return error.response()

    def stream_writer(self, call_id: str, model: str, echo: Mapping[str, Any]) -> ChatWriter:
        return ChatWriter(bool(echo.get("include_usage")))


CHAT = ChatSurface()

"""What a surface of the interactive lane is (``/v1/chat/completions``, ``/v1/responses``, Anthropic's
``/v1/messages``): one call flow (interactive.views: auth, limits, prepare, the lane, the record) serves
them all; a surface only translates — its request to the chat request the engine runs (the wire
family of ``gateway_engine.endpoints``: ``responses`` and ``messages`` are chat on the wire), the chat
answer, its stream chunks and the call's errors back to its own shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.http import HttpResponse

from ..errors import CallError


@dataclass(frozen=True)
class ChatRequest:
    """A surface's request as the engine's item: ``messages`` and ``params`` (the item's, checked by the
    batch item rules), whether it streams, and what the surface's answer echoes of the request. An
    embeddings surface gives ``input`` instead of messages (the item's endpoint is the surface's)."""

    messages: list[Any]
    params: dict[str, Any]
    stream: bool = False
    include_usage: bool = False
    echo: dict[str, Any] = field(default_factory=dict)
    input: Any = None


@dataclass(frozen=True)
class Answered:
    """What a surface's answer is made of: the call's id, the model asked for, the echo, the engine's
    chat answer and the cache-write tokens (Anthropic's ``cache_creation_input_tokens``)."""

    call_id: str
    model: str
    echo: Mapping[str, Any]
    chat: Mapping[str, Any]
    cache_write_tokens: int = 0


class StreamWriter(Protocol):
    """One streamed answer: the chat chunks in, the surface's event bytes out."""

    def chunk(self, chunk: dict[str, Any]) -> bytes: ...

    def done(self, usage_chunk: dict[str, Any] | None) -> bytes: ...

    def failed(self, error_type: str, message: str) -> bytes: ...

    def cut(self, code: str, message: str) -> bytes:
        """The last event of a stream the gateway itself ends (``stream_too_long``: not an error type)."""
        ...


class Surface(Protocol):
    """A request shape the lane answers (one module each under interactive/surfaces/)."""

    endpoint: str  # gateway_engine.endpoints: the record's and the item's endpoint
    id_prefix: str  # the call id's prefix ("chatcmpl-", "resp_", "msg_")

    def chat_request(self, body: dict[str, Any]) -> ChatRequest:
        """The body as a chat request, or a CallError naming the surface's own field."""
        ...

    def param(self, chat_field: str) -> str:
        """The surface's name of a chat-request field a check refused (``max_tokens`` →
        ``max_output_tokens``)."""
        ...

    def answer(self, answered: Answered) -> dict[str, Any]: ...

    def error_response(self, error: CallError) -> HttpResponse: ...

    def stream_writer(self, call_id: str, model: str, echo: Mapping[str, Any]) -> StreamWriter: ...


def sse(name: str | None, data: Mapping[str, Any]) -> bytes:
    """One Server-Sent Event (``event: name`` when named)."""
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def renamed(chat_field: str, names: Mapping[str, str]) -> str:
    """``chat_field`` with its first segment (before ``.`` or ``[``) renamed by ``names``."""
    for chat, own in names.items():
        if chat_field == chat or chat_field.startswith((chat + ".", chat + "[")):
            return own + chat_field[len(chat) :]
    return chat_field


def refused(field_name: str, message: str, code: str = "invalid_value") -> CallError:
    """A 400 naming the surface's field."""
    return CallError(400, f"{field_name}: {message}", param=field_name, code=code)


def unknown_fields(body: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    """Refuse the first field the surface does not know (400 naming it)."""
    for name in body:
        if name not in known:
            raise refused(
                name, f"unknown field; {what} takes {', '.join(sorted(known))}", "unknown_parameter"
            )


def stream_flag(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise refused("stream", "must be a boolean", "invalid_type")
    return stream


def chat_usage(chat: Mapping[str, Any]) -> tuple[int, int, int]:
    """(prompt, completion, cached prompt) tokens of a chat answer's or usage chunk's ``usage``."""
    usage = chat.get("usage") if isinstance(chat.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), int(cached or 0)


def first_choice_deltas(chunk: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], str | None]]:
    """(delta, finish reason) of each entry of a streamed chat chunk's ``choices`` for choice 0 (the
    only one a surface answers)."""
    for choice in chunk.get("choices") or ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            yield choice.get("delta") or {}, choice.get("finish_reason")


def first_choice(chat: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(the first choice's message, its finish reason) of a chat answer."""
    choices = chat.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    return message, choice.get("finish_reason")

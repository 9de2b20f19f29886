"""What every kind's stream decoder shares: reading one event's JSON as the non-stream path reads an
answer (``answers.parse_answer``: NUL and lone surrogates replaced, NaN / too deep refused), the error
step built from a kind's ``classify_error`` verdict, and the OpenAI ``chat.completion.chunk`` objects the
translated kinds (anthropic, gemini) write.
"""

from __future__ import annotations

from typing import Any

from ..answers import AnswerRejected, NotJson, parse_answer, sanitize_message
from ..retry import ErrorType
from .base import ErrorVerdict, Usage
from .chat_shape import openai_usage
from .stream_base import SseEvent, StreamError, StreamStep

MAX_CODE_CHARS = 64  # a provider's error type or code, as the client's error event carries it
CHUNK = "chat.completion.chunk"


def event_object(event: SseEvent) -> dict[str, Any] | StreamError:
    """The JSON object an event's data holds, or the StreamError (``invalid_response``) saying why not."""
    try:
        body = parse_answer(event.data.encode())
    except NotJson:
        return invalid("stream event is not JSON")
    except AnswerRejected as exc:
        return invalid(f"stream event refused: {exc}")
    if not isinstance(body, dict):
        return invalid("stream event is not a JSON object")
    return body


def invalid(message: str) -> StreamError:
    return StreamError(ErrorType.INVALID_RESPONSE, message, ErrorType.INVALID_RESPONSE)


def stream_error(verdict: ErrorVerdict, code: Any) -> StreamError:
    """The StreamError of a provider error classified as its HTTP answer would be; ``code`` is the
    provider's own error type or code (sanitised, capped), else the error type."""
    text = sanitize_message(code)[:MAX_CODE_CHARS] if isinstance(code, str) else ""
    return StreamError(verdict.error_type, verdict.message, text or verdict.error_type, verdict.pause)


def failed(error: StreamError) -> StreamStep:
    return StreamStep(error=error)


class ChunkWriter:
    """The OpenAI chunks of one translated stream: named ``completion_id`` / ``created``, the provider's
    model (``model``, set once the provider names it)."""

    __slots__ = ("completion_id", "created", "model")

    def __init__(self, completion_id: str, created: int, model: str = "") -> None:
        self.completion_id, self.created, self.model = completion_id, created, model

    def chunk(self, index: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """One ``chat.completion.chunk`` with one choice."""
        return {
            "id": self.completion_id,
            "object": CHUNK,
            "created": self.created,
            "model": self.model,
            "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }

    def usage_chunk(self, usage: Usage | None) -> dict[str, Any] | None:
        """The usage-only chunk (``choices: []``) of normalized usage; None without usage."""
        if usage is None:
            return None
        return {
            "id": self.completion_id,
            "object": CHUNK,
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": openai_usage(usage),
        }


def role_delta() -> dict[str, Any]:
    """The first delta of a choice (as OpenAI opens every stream)."""
    return {"role": "assistant", "content": ""}


def tool_call_start(index: int, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    """A ``delta.tool_calls`` entry opening call ``index`` (OpenAI streams a call's id, type and name
    once, then its arguments in pieces)."""
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def tool_call_arguments(index: int, piece: str) -> dict[str, Any]:
    """A ``delta.tool_calls`` entry carrying the next piece of call ``index``'s arguments."""
    return {"index": index, "function": {"arguments": piece}}

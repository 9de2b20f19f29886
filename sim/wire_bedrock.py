"""Amazon Bedrock's Converse API as the simulator serves it (kind ``bedrock``).

Routes: ``POST /{name}/model/{modelId}/converse`` and ``/converse-stream`` (base_url ``.../{name}``).
Every request must be SigV4-signed (sim/sigv4.py: checked against the configured ``aws_access_key_id``,
``region`` and, when ``api_key`` is set, the secret access key); the model id in the path must be the
configured model.

The body is checked as strictly as the real API (botocore's bedrock-runtime service model,
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html): only the Converse
request's members (an extraneous key is refused, as Bedrock refuses one), ``messages`` a non-empty list
of ``{role: user|assistant, content: [blocks]}`` starting with a user turn and alternating, each content
block one member (``text`` a string here; other members are accepted by name only), ``system`` a list of
``{text: non-empty}``, ``inferenceConfig{maxTokens ≥ 1, temperature 0–1, topP 0–1, stopSequences}``.
Errors are AWS's: the status, ``x-amzn-ErrorType: <Exception>:http://internal.amazon.com/coral/
com.amazon.bedrock/`` and ``{"message": ...}``. A streamed answer is AWS's binary event stream
(``application/vnd.amazon.eventstream``, CRC32 prelude and message checksums): messageStart,
contentBlockDelta per piece, contentBlockStop, messageStop, metadata; the in-stream error is a
``modelStreamErrorException``.
"""

from __future__ import annotations

import struct
import uuid
import zlib

from sim.streaming import Event, Framing, StreamPlan, dumps, split_text
from sim.wire_common import Call, Reply, Usage, is_int, is_number, type_name

TOP = (
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "guardrailConfig",
    "additionalModelRequestFields",
    "promptVariables",
    "additionalModelResponseFieldPaths",
    "requestMetadata",
    "performanceConfig",
    "serviceTier",
    "outputConfig",
    "projectIdentifier",
)
BLOCK = (
    "text",
    "image",
    "document",
    "video",
    "audio",
    "toolUse",
    "toolResult",
    "guardContent",
    "cachePoint",
    "reasoningContent",
    "citationsContent",
    "searchResult",
)
SYSTEM_BLOCK = ("text", "guardContent", "cachePoint")
INFERENCE = ("maxTokens", "temperature", "topP", "stopSequences")
TYPE_URL = "http://internal.amazon.com/coral/com.amazon.bedrock/"
NOT_ALTERNATING = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation "
    "alternates between user and assistant roles and try again."
)


def error(status: int, exception: str, message: str) -> Reply:
    headers = {"x-amzn-ErrorType": f"{exception}:{TYPE_URL}", "x-amzn-RequestId": str(uuid.uuid4())}
    return Reply(status, {"message": message}, headers)


def invalid(message: str) -> Reply:
    reply = error(400, "ValidationException", message)
    reply.rejected = "shape"
    return reply


def _block(block, where: str, members: tuple[str, ...]) -> str | None:
    if not isinstance(block, dict):
        return f"{where}: expected an object, got {type_name(block)}"
    keys = list(block)
    if len(keys) != 1:
        return f"{where}: exactly one member must be set, got {len(keys)}"
    if keys[0] not in members:
        return f"extraneous key [{keys[0]}] is not permitted"
    if keys[0] == "text" and not isinstance(block["text"], str):
        return f"{where}.text: expected a string, got {type_name(block['text'])}"
    return None


def _messages(messages) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "The model returned the following errors: messages: at least one message is required"
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            return f"{where}: expected an object, got {type_name(msg)}"
        extra = sorted(set(msg) - {"role", "content"})
        if extra:
            return f"extraneous key [{extra[0]}] is not permitted"
        if msg.get("role") not in ("user", "assistant"):
            return f"{where}.role: Member must satisfy enum value set: [user, assistant]"
        content = msg.get("content")
        if not isinstance(content, list) or not content:
            return f"{where}.content: Member must have length greater than or equal to 1"
        for j, block in enumerate(content):
            wrong = _block(block, f"{where}.content.{j}", BLOCK)
            if wrong:
                return wrong
            if block.get("text") == "":
                return f"{where}.content.{j}.text: The text field in the ContentBlock object is blank."
        if i == 0 and msg["role"] != "user":
            return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
        if i and msg["role"] == messages[i - 1].get("role"):
            return NOT_ALTERNATING
    return None


def _inference(cfg) -> str | None:
    if not isinstance(cfg, dict):
        return f"inferenceConfig: expected an object, got {type_name(cfg)}"
    extra = sorted(set(cfg) - set(INFERENCE))
    if extra:
        return f"extraneous key [{extra[0]}] is not permitted"
    if "maxTokens" in cfg and (not is_int(cfg["maxTokens"]) or cfg["maxTokens"] < 1):
        return "inferenceConfig.maxTokens: Member must have value greater than or equal to 1"
    for key in ("temperature", "topP"):
        if key in cfg and (not is_number(cfg[key]) or not 0 <= cfg[key] <= 1):
            return f"inferenceConfig.{key}: Member must have value between 0 and 1"
    stops = cfg.get("stopSequences", [])
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > 2500:
        return "inferenceConfig.stopSequences: Member must be a list of at most 2500 non-empty strings"
    return None


def validate(body) -> Reply | None:
    if not isinstance(body, dict):
        return invalid(f"Request body: expected an object, got {type_name(body)}")
    extra = [k for k in body if k not in TOP]
    if extra:
        return invalid(f"extraneous key [{extra[0]}] is not permitted")
    problem = _messages(body.get("messages"))
    system = body.get("system", [])
    if problem is None and not isinstance(system, list):
        problem = f"system: expected a list, got {type_name(system)}"
    for j, block in enumerate(system if problem is None else []):
        problem = _block(block, f"system.{j}", SYSTEM_BLOCK)
        if problem is None and block.get("text") == "":
            problem = f"system.{j}.text: Member must have length greater than or equal to 1"
        if problem:
            break
    if problem is None and "inferenceConfig" in body:
        problem = _inference(body["inferenceConfig"])
    return invalid(problem) if problem else None


def call(body: dict, model: str, default_max_tokens: int, stream: bool) -> Call:
    texts = [b["text"] for b in body.get("system", []) if "text" in b]
    for msg in body["messages"]:
        texts += [b["text"] for b in msg["content"] if "text" in b]
    last = " ".join(b["text"] for b in body["messages"][-1]["content"] if "text" in b)
    inference = body.get("inferenceConfig") or {}
    return Call(
        texts=texts,
        last_text=last,
        max_tokens=inference.get("maxTokens") or default_max_tokens,
        model=model,
        stop_sequences=list(inference.get("stopSequences") or []),
        stream="eventstream" if stream else None,
    )


def _usage(usage: Usage) -> dict:
    """inputTokens are the uncached input; cache reads and writes are counted apart."""
    out = {
        "inputTokens": usage.uncached,
        "outputTokens": usage.completion,
        "totalTokens": usage.prompt + usage.completion,
    }
    if usage.cache_read:
        out["cacheReadInputTokens"] = usage.cache_read
    if usage.cache_write:
        out["cacheWriteInputTokens"] = usage.cache_write
    return out


def _ending(name: str, c: Call, usage: Usage) -> tuple[str, str]:
    return (
        "max_tokens" if usage.completion >= c.max_tokens else "end_turn",
        f"[{name}] " + "tok " * usage.completion,
    )


def answer(name: str, c: Call, usage: Usage) -> dict:
    stop, text = _ending(name, c, usage)
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": _usage(usage),
        "metrics": {"latencyMs": 1},
    }


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (lengths + CRC32), string headers, payload, message CRC32."""
    block = b"".join(_header(n, v) for n, v in headers.items())
    prelude = struct.pack(">II", 12 + len(block) + len(payload) + 4, len(block))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + block + payload
    return head + struct.pack(">I", zlib.crc32(head))


class EventStreamFraming(Framing):
    """Events as binary messages: ``(name, data)`` with name ``messageStart`` … an event,
    ``exception:<type>`` an exception."""

    def __init__(self) -> None:
        super().__init__("eventstream", content_type="application/vnd.amazon.eventstream")

    def encode(self, event: Event, position: int) -> bytes:
        name, data = event
        kind, _, exception = (name or "").partition(":")
        payload = dumps(data).encode()
        if kind == "exception":
            headers = {
                ":exception-type": exception,
                ":content-type": "application/json",
                ":message-type": "exception",
            }
        else:
            headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
        return encode_message(headers, payload)

    def close(self, written: int) -> bytes:
        return b""


EVENTSTREAM = EventStreamFraming()


def stream_plan(name: str, c: Call, usage: Usage, chunks: int) -> StreamPlan:
    stop, text = _ending(name, c, usage)
    pad = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"  # Bedrock pads events with "p"
    content: list[Event] = [
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}, "p": pad[:8]})
        for piece in split_text(text, chunks)
    ]
    tail: list[Event] = [
        ("contentBlockStop", {"contentBlockIndex": 0, "p": pad[:4]}),
        ("messageStop", {"stopReason": stop, "p": pad[:12]}),
        ("metadata", {"usage": _usage(usage), "metrics": {"latencyMs": 1}, "p": pad[:6]}),
    ]
    error: Event = (
        "exception:modelStreamErrorException",
        {"message": "The model encountered an error processing the stream.", "originalStatusCode": 500},
    )
    return StreamPlan(
        EVENTSTREAM,
        head=[("messageStart", {"role": "assistant", "p": pad[:10]})],
        content=content,
        tail=tail,
        error=error,
    )


FORMS = {
    "rate_limit": (429, "ThrottlingException", "Too many requests, please wait before trying again."),
    "overloaded": (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
    "unavailable": (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
    "server_error": (500, "InternalServerException", "The server encountered an internal error."),
    "model_not_ready": (
        429,
        "ModelNotReadyException",
        "Model is not ready for inference. Wait and try your request again.",
    ),
    "model_timeout": (408, "ModelTimeoutException", "Model has timed out in processing the request."),
    "quota": (
        400,
        "ServiceQuotaExceededException",
        "Your request exceeds the service quota for your account.",
    ),
}
STATUS_EXCEPTIONS = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def form(name: str) -> Reply:
    status, exception, message = FORMS[name]
    return error(status, exception, message)

"""Anthropic Messages API (``POST /{name}/v1/messages``), validated as the real API does.

Shapes copied from the published reference (https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/api/errors, https://docs.anthropic.com/en/api/rate-limits); error messages
as the API words them (pydantic-style ``field: Input should be ...``; seen verbatim in public reports, e.g.
"anthropic-version: header is required", "invalid x-api-key", "response_format: Extra inputs are not
permitted", "messages: Unexpected role \\"system\\". The Messages API accepts a top-level `system`
parameter, not \\"system\\" as an input message role.").
"""

from __future__ import annotations

import math
import uuid

from sim.streaming import SSE, Event, StreamPlan, split_text
from sim.wire_common import Call, Reply, Usage, is_int, is_number, rfc3339_after

# https://docs.anthropic.com/en/api/versioning: 2026-10-21 (the current SDKs' default) removes temperature,
# top_p and top_k — a request that sends any of them is refused; 2023-06-01 (what the gateway sends) and
# 2023-01-01 take them.
VERSIONS = ("2026-10-21", "2023-06-01", "2023-01-01")
NO_SAMPLING_VERSIONS = ("2026-10-21",)
# the Messages API's request fields (temperature / top_p / top_k: taken by the models that have them; the
# current anthropic SDK no longer offers them as arguments, only through extra_body)
TOP_KEYS = {"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream", "temperature",
            "top_p", "top_k", "tools", "tool_choice", "thinking", "service_tier", "cache_control", "container",
            "context_management", "mcp_servers", "output_config", "inference_geo", "speed", "diagnostics",
            "user_profile_id", "workspace_id"}  # fmt: skip
BLOCK_KEYS = {
    "text": ({"type", "text"}, {"cache_control", "citations"}),
    "image": ({"type", "source"}, {"cache_control"}),
    "document": ({"type", "source"}, {"cache_control", "citations", "context", "title"}),
    "tool_use": ({"type", "id", "name", "input"}, {"cache_control"}),
    "tool_result": ({"type", "tool_use_id"}, {"cache_control", "content", "is_error"}),
    "thinking": ({"type", "thinking", "signature"}, set()),
    "redacted_thinking": ({"type", "data"}, set()),
}


def error(status: int, type_: str, message: str, **extra) -> Reply:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}`` (the errors page's shape)."""
    err = {"type": type_, "message": message, **extra}
    return Reply(status, {"type": "error", "error": err, "request_id": f"req_sim{uuid.uuid4().hex[:20]}"})


def invalid(message: str) -> Reply:
    reply = error(400, "invalid_request_error", message)
    reply.rejected = "shape"
    return reply


def check_headers(headers, api_key: str | None) -> Reply | None:
    """anthropic-version required and known; the key required when the provider has one."""
    version = headers.get("anthropic-version")
    if version is None:
        return invalid("anthropic-version: header is required")
    if version not in VERSIONS:
        return invalid(f'anthropic-version: "{version}" is not a valid version')
    if api_key is not None:
        # the key in x-api-key, or as a bearer token (what the current anthropic SDK sends)
        bearer = headers.get("authorization", "")
        given = headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else None)
        if given != api_key:
            reply = error(401, "authentication_error",
                          "x-api-key header is required" if given is None else "invalid x-api-key")  # fmt: skip
            reply.rejected = "auth"
            return reply
    return None


def cache_control_problem(value, loc: str) -> str | None:
    """``{"type": "ephemeral", "ttl"?: "5m" | "1h"}`` (null: no breakpoint), as the API checks it."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"{loc}: Input should be a valid dictionary or object to extract fields from"
    if value.get("type") != "ephemeral":
        return f"{loc}.type: Input should be 'ephemeral'"
    for key in sorted(set(value) - {"type", "ttl"}):
        return f"{loc}.{key}: Extra inputs are not permitted"
    if "ttl" in value and value["ttl"] not in ("5m", "1h"):
        return f"{loc}.ttl: Input should be '5m' or '1h'"
    return None


def _breakpoint_count(body: dict) -> int:
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    blocks += [t for t in body.get("tools") or [] if isinstance(t, dict)]
    count = sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control") is not None)
    return count + (body.get("cache_control") is not None)


def _blocks(blocks, where: str, *, text_only: bool = False) -> str | None:
    for j, block in enumerate(blocks):
        loc = f"{where}.{j}"
        if not isinstance(block, dict):
            return f"{loc}: Input should be a valid dictionary or object to extract fields from"
        kind = block.get("type")
        if kind not in BLOCK_KEYS or (text_only and kind != "text"):
            tags = "'text'" if text_only else ", ".join(f"'{k}'" for k in BLOCK_KEYS)
            return f"{loc}: Input tag '{kind}' found using 'type' does not match any of the expected tags: {tags}"
        required, optional = BLOCK_KEYS[kind]
        for key in sorted(required - set(block)):
            return f"{loc}.{kind}.{key}: Field required"
        for key in sorted(set(block) - required - optional):
            return f"{loc}.{kind}.{key}: Extra inputs are not permitted"
        if "cache_control" in block:
            problem = cache_control_problem(block["cache_control"], f"{loc}.{kind}.cache_control")
            if problem:
                return problem
        if kind == "text":
            if not isinstance(block["text"], str):
                return f"{loc}.text.text: Input should be a valid string"
            if not block["text"]:
                return f"{where.split('.')[0]}: text content blocks must be non-empty"
    return None


def _messages(messages) -> str | None:
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"messages.{i}: Input should be a valid dictionary or object to extract fields from"
        for key in ("role", "content"):
            if key not in m:
                return f"messages.{i}.{key}: Field required"
        for key in sorted(set(m) - {"role", "content"}):
            return f"messages.{i}.{key}: Extra inputs are not permitted"
        if m["role"] == "system":
            return ('messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                    'parameter, not "system" as an input message role.')  # fmt: skip
        if m["role"] not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = m["content"]
        final_assistant = i == len(messages) - 1 and m["role"] == "assistant"
        if isinstance(content, str):
            if not content and not final_assistant:
                return (f"messages.{i}: all messages must have non-empty content except for the optional "
                        f"final assistant message")  # fmt: skip
        elif isinstance(content, list):
            if not content and not final_assistant:
                return (f"messages.{i}: all messages must have non-empty content except for the optional "
                        f"final assistant message")  # fmt: skip
            problem = _blocks(content, f"messages.{i}.content")
            if problem:
                return problem
        else:
            return f"messages.{i}.content: Input should be a valid string or a list of content blocks"
    return None


def _bounded(body: dict, key: str, low, high, *, integer: bool = False) -> str | None:
    if key not in body:
        return None
    value = body[key]
    if integer and not is_int(value):
        return f"{key}: Input should be a valid integer"
    if not integer and not is_number(value):
        return f"{key}: Input should be a valid number"
    if low is not None and value < low:
        return f"{key}: Input should be greater than or equal to {low}"
    if high is not None and value > high:
        return f"{key}: Input should be less than or equal to {high}"
    return None


def validate(body, version: str = "2023-06-01") -> str | None:
    """The first problem the real API would report for ``anthropic-version: version`` (None: valid)."""
    if not isinstance(body, dict):
        return "Input should be a valid dictionary or object to extract fields from"
    if version in NO_SAMPLING_VERSIONS:
        for key in ("temperature", "top_p", "top_k"):
            if key in body:
                return f"`{key}` is not supported in API version {version}; remove it from the request"
    for key in sorted(set(body) - TOP_KEYS):
        return f"{key}: Extra inputs are not permitted"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["model"], str):
        return "model: Input should be a valid string"
    problem = _bounded(body, "max_tokens", 1, None, integer=True) or _messages(body["messages"])
    if problem:
        return problem
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            return "system: Input should be a valid string or a list of text blocks"
        problem = _blocks(system, "system", text_only=True)
        if problem:
            return problem
    problem = cache_control_problem(body.get("cache_control"), "cache_control")
    if problem:
        return problem
    marked = _breakpoint_count(body)
    if marked > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {marked}."
    problem = (_bounded(body, "temperature", 0, 1) or _bounded(body, "top_p", 0, 1)
               or _bounded(body, "top_k", 0, None, integer=True))  # fmt: skip
    if problem:
        return problem
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list):
            return "stop_sequences: Input should be a valid list"
        for i, s in enumerate(stops):
            if not isinstance(s, str):
                return f"stop_sequences.{i}: Input should be a valid string"
    metadata = body.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or set(metadata) - {"user_id"}):
        return "metadata: Input should be an object with only user_id"
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        return "stream: Input should be a valid boolean"
    return None


def _texts(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _marked_texts(content, texts: list[str], breakpoints: list[int]) -> None:
    """Append a system / message content's texts; a block with ``cache_control`` ends a cache prefix
    (its index into ``texts``: the texts before the breakpoint, that block's included)."""
    if isinstance(content, str):
        texts.append(content)
        return
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        if b.get("cache_control") is not None:
            breakpoints.append(len(texts))


def call(body: dict) -> Call:
    """The prompt's texts in the order Anthropic caches them (system, then messages) and the
    ``cache_control`` breakpoints; a top-level ``cache_control`` marks the last block."""
    texts: list[str] = []
    breakpoints: list[int] = []
    _marked_texts(body.get("system") or [], texts, breakpoints)
    for m in body["messages"]:
        _marked_texts(m["content"], texts, breakpoints)
    if body.get("cache_control") is not None:
        breakpoints.append(len(texts))
    last = _texts(body["messages"][-1]["content"])
    return Call(texts=texts, last_text=" ".join(last), max_tokens=body["max_tokens"], model=body["model"],
                stop_sequences=list(body.get("stop_sequences") or []),
                stream="sse" if body.get("stream") is True else None, breakpoints=breakpoints)  # fmt: skip


def _ending(name: str, c: Call, usage: Usage, refusal: bool) -> tuple[str, str | None, str]:
    """(stop_reason, stop_sequence, text) of an answer."""
    if refusal:
        stop_reason, stop_sequence, text = "refusal", None, ""
    elif usage.completion >= c.max_tokens:
        stop_reason, stop_sequence, text = "max_tokens", None, f"[{name}] " + "tok " * usage.completion
    elif c.stop_sequences:
        stop_reason, stop_sequence, text = (
            "stop_sequence",
            c.stop_sequences[0],
            f"[{name}] " + "tok " * usage.completion,
        )
    else:
        stop_reason, stop_sequence, text = "end_turn", None, f"[{name}] " + "tok " * usage.completion
    return stop_reason, stop_sequence, text


def answer(name: str, c: Call, usage: Usage, refusal: bool = False) -> dict:
    """A Messages API ``message``: content blocks, stop_reason, usage (input_tokens excludes the cache)."""
    stop_reason, stop_sequence, text = _ending(name, c, usage, refusal)
    return {
        "id": f"msg_sim{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {
            "input_tokens": usage.uncached,
            "output_tokens": usage.completion,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
        },
    }


def stream_plan(name: str, c: Call, usage: Usage, chunks: int, refusal: bool = False) -> StreamPlan:
    """The streaming reference's event flow: ``message_start`` (the message with empty content, usage
    input_tokens and cache counts, output_tokens 1), ``content_block_start``, ``ping``, one
    ``content_block_delta`` (text_delta) per text piece, ``content_block_stop``, ``message_delta``
    (stop_reason, stop_sequence, usage.output_tokens: the total), ``message_stop``. A refusal has no
    content block."""
    stop_reason, stop_sequence, text = _ending(name, c, usage, refusal)
    pieces = split_text(text, chunks)
    message: dict = {"id": f"msg_sim{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": c.model,
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": usage.uncached, "cache_creation_input_tokens": usage.cache_write,
                         "cache_read_input_tokens": usage.cache_read, "output_tokens": 1}}  # fmt: skip
    head: list[Event] = [("message_start", {"type": "message_start", "message": message})]
    if pieces:
        head.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}))  # fmt: skip
    head.append(("ping", {"type": "ping"}))
    content: list[Event] = [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                     "delta": {"type": "text_delta", "text": piece}})
                            for piece in pieces]  # fmt: skip
    tail: list[Event] = [("content_block_stop", {"type": "content_block_stop", "index": 0})] if pieces else []
    tail.append(("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                                   "usage": {"output_tokens": usage.completion}}))  # fmt: skip
    tail.append(("message_stop", {"type": "message_stop"}))
    return StreamPlan(SSE, head, content, tail, stream_error())


def stream_error() -> Event:
    """``event: error`` with the overloaded error (the streaming reference's example)."""
    return ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def rate_headers(state: dict[str, tuple[int, int, float]]) -> dict[str, str]:
    """anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}; resets
    RFC 3339. ``tokens`` is the most restrictive of the token limits in effect (the rate-limits page)."""
    h: dict[str, str] = {}
    names = {"requests": "requests", "input_tokens": "input-tokens", "output_tokens": "output-tokens",
             "tokens": "tokens"}  # fmt: skip
    token_states = [state[n] for n in ("tokens", "input_tokens", "output_tokens") if n in state]
    merged = dict(state)
    if token_states and "tokens" not in state:
        merged["tokens"] = min(token_states, key=lambda s: s[1])
    for key, (limit, remaining, reset) in merged.items():
        prefix = f"anthropic-ratelimit-{names[key]}"
        h[f"{prefix}-limit"] = str(limit)
        h[f"{prefix}-remaining"] = str(remaining)
        h[f"{prefix}-reset"] = rfc3339_after(reset)
    return h


LIMIT_WORDS = {"requests": "requests per minute", "tokens": "tokens per minute",
               "input_tokens": "input tokens per minute", "output_tokens": "output tokens per minute"}  # fmt: skip


def rate_limited(limit: str, wait: float, state) -> Reply:
    """429 rate_limit_error with retry-after (integer seconds) and the ratelimit headers."""
    value = state.get(limit, (0, 0, 0))[0]
    reply = error(429, "rate_limit_error",
                  f"This request would exceed the rate limit for your organization of {value} "
                  f"{LIMIT_WORDS[limit]}. For details, refer to: https://docs.claude.com/en/api/rate-limits. "
                  f"You can see the response headers for current usage.")  # fmt: skip
    reply.headers = {**rate_headers(state), "retry-after": str(max(1, math.ceil(wait)))}
    return reply


def form(name: str) -> Reply:
    """A named fault form (sim/kind_config.py KIND_FORMS["anthropic"])."""
    if name == "overloaded":
        return error(529, "overloaded_error", "Overloaded")
    if name == "rate_limit":
        reply = error(
            429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
        )
        reply.headers = {"retry-after": "1"}
        return reply
    if name == "server_error":
        return error(500, "api_error", "Internal server error")
    if name == "unavailable":
        return error(503, "api_error", "Service unavailable")
    if name == "spend_429":
        return error(429, "rate_limit_error", "You have reached your specified workspace spend limit.",
                     details={"error_code": "enforced_spend_limit_reached"})  # fmt: skip
    if name == "spend_400":
        return error(400, "invalid_request_error", "You have reached your specified API usage limits. "
                     "You will regain access on 2099-01-01 at 00:00 UTC.")  # fmt: skip
    if name == "spend_402":
        return error(402, "billing_error", "Your credit balance is too low to access the Anthropic API. "
                     "Please go to Plans & Billing to upgrade or purchase credits.")  # fmt: skip
    raise ValueError(f"not an anthropic error form: {name}")

"""Anthropic's Messages API request (``POST /v1/messages``, https://docs.anthropic.com/en/api/messages)
as a chat request. Pure.

``model`` and ``max_tokens`` are required (as Anthropic requires them; ``max_tokens`` →
``max_completion_tokens``); ``system`` (a string or text blocks) → system messages; ``messages``
(user / assistant, content a string or blocks): ``text`` and ``image`` (base64 → a ``data:`` URL, url →
the URL) → content parts, ``tool_use`` → the assistant's ``tool_calls``, ``tool_result`` → a ``tool``
message (its text); ``tools`` (``{name, description, input_schema}``) → function tools; ``tool_choice``
(auto / any / tool / none, ``disable_parallel_tool_use``) → ``tool_choice`` + ``parallel_tool_calls``;
``stop_sequences`` → ``stop``; ``temperature``, ``top_p``; ``metadata.user_id`` → ``user``.

``cache_control`` (prompt caching): on a text or image block of a message or on a system block it is
carried on the chat content part, which the anthropic wire turns back into the same breakpoint
(gateway_engine/wire/anthropic_request.py; other kinds cache on their own, docs/interactive.md); the
top-level ``cache_control`` marks the last block of the last message (what Anthropic's automatic caching
does). The chat path has no place for a marker on a ``tool_use`` or ``tool_result`` block or on a tool
definition, nor for ``is_error``: those are left out (documented, docs/interactive.md). ``top_k``,
``thinking`` and server tools do not map: refused naming the field, as is any unknown field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import ChatRequest, refused, stream_flag, unknown_fields

KNOWN = frozenset({"model", "max_tokens", "messages", "system", "metadata", "stop_sequences", "stream",
                   "temperature", "top_p", "top_k", "tools", "tool_choice", "cache_control"})  # fmt: skip
FIELD_NAMES = {"max_completion_tokens": "max_tokens", "stop": "stop_sequences", "user": "metadata.user_id",
               "parallel_tool_calls": "tool_choice.disable_parallel_tool_use"}  # fmt: skip
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
Parts = list[dict[str, Any]]


def chat_request(body: Mapping[str, Any]) -> ChatRequest:
    """The Messages body as a chat request (a CallError naming the first field that does not map)."""
    unknown_fields(body, KNOWN, "POST /v1/messages")
    if body.get("top_k") is not None:
        raise refused("top_k", "not carried: the gateway's chat path has no top_k (leave it out)",
                      "unsupported_parameter")  # fmt: skip
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise refused("max_tokens", "required, an integer >= 1", "missing_required_parameter")
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise refused("messages", "required, a non-empty list", "missing_required_parameter")
    messages = _system(body.get("system"))
    for i, message in enumerate(body["messages"]):
        messages += _message(f"messages[{i}]", message)
    if body.get("cache_control") is not None:
        _mark_last(messages, body["cache_control"])
    params: dict[str, Any] = {"max_completion_tokens": max_tokens}
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            params[name] = body[name]
    if body.get("stop_sequences") is not None:
        params["stop"] = body["stop_sequences"]
    params |= (
        _metadata(body.get("metadata")) | _tools(body.get("tools")) | _tool_choice(body.get("tool_choice"))
    )
    return ChatRequest(messages, params, stream_flag(body), False, {})


def _system(value: Any) -> list[dict[str, Any]]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [{"role": "system", "content": value}]
    if not isinstance(value, list):
        raise refused("system", "a string or a list of text blocks", "invalid_type")
    out = []
    for j, block in enumerate(value):
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            raise refused(f"system[{j}]", "only text blocks")
        out.append({"role": "system", "content": [_marked({"type": "text", "text": block["text"]}, block)]})
    return out


def _marked(part: dict[str, Any], block: Mapping[str, Any]) -> dict[str, Any]:
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part


def _message(where: str, message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise refused(f"{where}.role", "user or assistant")
    for key in message:
        if key not in ("role", "content"):
            raise refused(f"{where}.{key}", "unknown field of a message", "unknown_parameter")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    if not isinstance(content, list) or not content:
        raise refused(f"{where}.content", "a string or a non-empty list of content blocks", "invalid_type")
    if message["role"] == "assistant":
        return [_assistant(where, content)]
    return _user(where, content)


def _user(where: str, blocks: list[Any]) -> list[dict[str, Any]]:
    """A user turn: its tool results first (tool messages, as the chat path wants them right after the
    assistant's calls), then its other blocks as one user message."""
    tools: list[dict[str, Any]] = []
    parts: Parts = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            tools.append(_tool_result(at, block))
        elif kind in ("text", "image"):
            parts.append(_part(at, block))
        else:
            raise refused(f"{at}.type", f"{kind!r} does not map in a user message (text, image and "
                          "tool_result do)")  # fmt: skip
    return tools + ([{"role": "user", "content": parts}] if parts else [])


def _part(at: str, block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        if not isinstance(block.get("text"), str):
            raise refused(f"{at}.text", "must be a string", "invalid_type")
        return _marked({"type": "text", "text": block["text"]}, block)
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type')};base64,{source['data']}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise refused(f"{at}.source", "a base64 or url image source")
    return _marked({"type": "image_url", "image_url": {"url": url}}, block)


def _tool_result(at: str, block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content", "")
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if len(texts) != len(content) or not all(isinstance(t, str) for t in texts):
            raise refused(f"{at}.content", "only text blocks map in a tool_result")
        content = "\n".join(texts)  # type: ignore[arg-type]
    if not isinstance(block.get("tool_use_id"), str) or not isinstance(content, str):
        raise refused(at, "a tool_result needs a tool_use_id and text content")
    return {"role": "tool", "tool_call_id": block["tool_use_id"], "content": content}


def _assistant(where: str, blocks: list[Any]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise refused(at, "a tool_use block needs an id and a name")
            arguments = json.dumps(block.get("input") or {}, separators=(",", ":"))
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": arguments}})  # fmt: skip
        else:
            raise refused(
                f"{at}.type", f"{kind!r} does not map in an assistant message (text and tool_use do)"
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def _mark_last(messages: list[dict[str, Any]], mark: Any) -> None:
    """The top-level ``cache_control``: a breakpoint on the last block of the last message."""
    last = messages[-1]
    if isinstance(last.get("content"), str) and last["role"] in ("user", "system"):
        last["content"] = [{"type": "text", "text": last["content"]}]
    content = last.get("content")
    if not isinstance(content, list) or not content or content[-1].get("type") not in ("text", "image_url"):
        raise refused("cache_control", "the last message's last block must be text or an image to carry "
                      "the marker (a tool_result cannot on the chat path); mark a block instead")  # fmt: skip
    content[-1]["cache_control"] = mark


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) - {"user_id"}:
        raise refused("metadata", "an object with user_id only")
    return {"user": value["user_id"]} if value.get("user_id") is not None else {}


def _tools(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise refused("tools", "a list of tools", "invalid_type")
    out = []
    for i, tool in enumerate(value):
        if (
            not isinstance(tool, dict)
            or tool.get("type") not in (None, "custom")
            or "input_schema" not in tool
        ):
            raise refused(f"tools[{i}]", "only client tools {name, description, input_schema} map (the "
                          "gateway runs no server tools)")  # fmt: skip
        for key in tool:
            if key not in ("type", "name", "description", "input_schema", "cache_control"):
                raise refused(f"tools[{i}].{key}", "unknown field of a tool", "unknown_parameter")
        fn = {"name": tool.get("name"), "parameters": tool["input_schema"]}
        if tool.get("description"):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return {"tools": out} if out else {}


def _tool_choice(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "tool" and isinstance(value.get("name"), str):
        params: dict[str, Any] = {"tool_choice": {"type": "function", "function": {"name": value["name"]}}}
    elif kind in _CHOICES:
        params = {"tool_choice": _CHOICES[kind]}
    else:
        raise refused("tool_choice", "auto, any, tool (with a name) or none")
    if value.get("disable_parallel_tool_use"):
        params["parallel_tool_calls"] = False
    return params

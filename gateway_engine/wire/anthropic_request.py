"""The Anthropic Messages request built from the one internal ITEM shape (OpenAI-style ``messages`` +
``params``), and the params the kind takes.

Shapes from the Messages API reference (https://docs.anthropic.com/en/api/messages): ``system`` is a
top-level field, ``messages`` alternate user / assistant with content blocks (text, image, tool_use,
tool_result), ``max_tokens`` is required, ``temperature`` and ``top_p`` are 0–1, ``stop_sequences``,
``metadata.user_id``, ``tools[{name, description, input_schema}]``, ``tool_choice{type: auto|any|tool|none}``.

One function, ``translate``, both builds the body and lists what cannot be mapped (``check`` uses the
list, ``body`` refuses to send a request with any), so the check at submission and the request sent
can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..routing import ProviderConfig
from .base import ParamProblem
from .chat_shape import content_text, data_url, image_url, parsed_arguments
from .params import (
    Spec,
    boolean,
    check,
    integer,
    max_output_tokens,
    number,
    stop_list,
    stops,
    text,
    tool_choice,
    tools,
)
from .translation import MessageWalk, plain_turns

PARAMS: Mapping[str, Spec] = {
    "max_tokens": integer(1),
    "max_completion_tokens": integer(1),
    "temperature": number(0, 1),
    "top_p": number(0, 1),
    "stop": stop_list(),
    "user": text,
    "tools": tools,
    "tool_choice": tool_choice,
    "parallel_tool_calls": boolean,
}
_CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
Blocks = list[dict[str, Any]]
_ROLES = {"system": "system", "user": "user", "assistant": "assistant"}


def _turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def _cache_control(value: Any) -> bool:
    """A ``cache_control`` marker the Messages API takes: ``{"type": "ephemeral", "ttl"?: "5m" | "1h"}``."""
    return (
        isinstance(value, dict)
        and value.get("type") == "ephemeral"
        and set(value) <= {"type", "ttl"}
        and value.get("ttl", "5m") in ("5m", "1h")
    )


CACHE_CONTROL_RULE = 'must be {"type": "ephemeral"} (with an optional "ttl": "5m" or "1h")'


class _Walk(MessageWalk):
    """One pass over an item's messages: the system prompt, the turns, the problems. Anthropic
    ``cache_control`` markers on content parts pass through untouched (prompt caching breakpoints);
    a marked part of a system message marks that message's system block."""

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.turns: list[dict[str, Any]] = []
        self.system_marks: list[Any] = []  # per system text: its cache_control marker, or None

    def message(self, i: int, msg: Any) -> None:
        before = len(self.system)
        super().message(i, msg)
        if len(self.system) > before:
            self.system_marks.append(self.marker(f"messages[{i}].content", msg.get("content")))

    def marker(self, field: str, content: Any) -> Any:
        """The last cache_control marker among a system message's parts (None: unmarked)."""
        mark = None
        for j, part in enumerate(content if isinstance(content, list) else []):
            if isinstance(part, dict) and part.get("cache_control") is not None:
                mark = self.checked_mark(f"{field}[{j}]", part["cache_control"])
        return mark

    def checked_mark(self, field: str, value: Any) -> Any:
        if not _cache_control(value):
            self.refuse(f"{field}.cache_control", CACHE_CONTROL_RULE)
        return value

    def marked(self, field: str, block: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
        if part.get("cache_control") is not None:
            block["cache_control"] = self.checked_mark(field, part["cache_control"])
        return block

    def system_value(self) -> str | list[dict[str, Any]]:
        """The top-level ``system``: one string, or text blocks when a system message is marked."""
        if not any(mark is not None for mark in self.system_marks):
            return "\n\n".join(self.system)
        return [
            {"type": "text", "text": text, **({"cache_control": mark} if mark is not None else {})}
            for text, mark in zip(self.system, self.system_marks, strict=True)
        ]

    def add(self, role: str, blocks: Blocks | str) -> None:
        """Consecutive turns of one role become one (tool results after tool results, a user turn
        after them): the API wants user / assistant alternating. A plain string stays a string
        (the common, smallest form) until another turn is merged into it."""
        if self.turns and self.turns[-1]["role"] == role:
            last = self.turns[-1]
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"].extend([{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks)
        else:
            self.turns.append({"role": role, "content": blocks})

    def user(self, field: str, content: Any) -> None:
        self.add("user", content if isinstance(content, str) else self.content_parts(field, content))

    def assistant(self, field: str, msg: dict[str, Any]) -> None:
        self.add("assistant", self.assistant_blocks(field, msg))

    def tool(self, field: str, msg: dict[str, Any]) -> None:
        self.add("user", [self.tool_result(field, msg)])

    def text_part(self, text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    def part(self, field: str, part: Any) -> dict[str, Any] | None:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            return self.marked(field, {"type": "text", "text": part["text"]}, part)
        url = image_url(part) if kind == "image_url" else None
        if url is not None:
            inline = data_url(url)
            if inline is not None:
                source = {"type": "base64", "media_type": inline[0], "data": inline[1]}
            else:
                source = {"type": "url", "url": url}
            return self.marked(field, {"type": "image", "source": source}, part)
        self.refuse(field, f"content part type {kind!r} does not map (text and image_url do)")
        return None

    def assistant_blocks(self, field: str, msg: dict[str, Any]) -> Blocks:
        said = self.assistant_text(field, msg)
        blocks: Blocks = [{"type": "text", "text": said}] if said else []
        for j, call in enumerate(self.tool_calls(field, msg)):
            args = parsed_arguments(call)
            if args is None or not isinstance(call.get("id"), str):
                self.refuse(
                    f"{field}.tool_calls[{j}]", "needs an id, a function name and JSON object arguments"
                )
                continue
            blocks.append(
                {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": args}
            )
        return blocks

    def tool_result(self, field: str, msg: dict[str, Any]) -> dict[str, Any]:
        said = content_text(msg.get("content"))
        if not isinstance(msg.get("tool_call_id"), str) or said is None:
            self.refuse(field, "a tool message needs a tool_call_id and text content")
        return {"type": "tool_result", "tool_use_id": msg.get("tool_call_id"), "content": said or ""}


def _plain(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn that is one text block is sent as a plain string (the common, smallest form)."""
    for turn in turns:
        blocks = turn["content"]
        if isinstance(blocks, list) and len(blocks) == 1 and set(blocks[0]) == {"type", "text"}:
            turn["content"] = blocks[0]["text"]
    return turns


def _tools(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tool in value:
        fn = tool["function"]
        entry = {
            "name": fn["name"],
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
        }
        if fn.get("description"):
            entry["description"] = fn["description"]
        out.append(entry)
    return out


def _tool_choice(params: Mapping[str, Any]) -> dict[str, Any] | None:
    value = params.get("tool_choice")
    if isinstance(value, dict):
        choice: dict[str, Any] = {"type": "tool", "name": value["function"]["name"]}
    elif value is not None:
        choice = dict(_CHOICES[value])
    elif params.get("parallel_tool_calls") is False:
        choice = {"type": "auto"}
    else:
        return None
    if params.get("parallel_tool_calls") is False and choice["type"] != "none":
        choice["disable_parallel_tool_use"] = True
    return choice


def _apply_params(body: dict[str, Any], params: Mapping[str, Any]) -> None:
    """The checked params onto the body (one pass over the item's params: this runs per request)."""
    for name, value in params.items():
        if name == "temperature" or name == "top_p":
            body[name] = value
        elif name == "stop":
            body["stop_sequences"] = stops(value)
        elif name == "user":
            body["metadata"] = {"user_id": value}
        elif name == "tools" and value:
            body["tools"] = _tools(value)
    if "tool_choice" in params or "parallel_tool_calls" in params:
        choice = _tool_choice(params)
        if choice is not None:
            body["tool_choice"] = choice


def translate(
    config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[ParamProblem]]:
    """(the Messages API body, every field that does not map). ``max_tokens`` is the item's
    ``max_completion_tokens`` / ``max_tokens``, else the provider's ``default_max_tokens``."""
    params = params or {}
    problems = check(config, params, PARAMS)
    plain = plain_turns(messages, _ROLES, _turn)
    walk = _Walk(config)
    if plain is None:
        walk.walk(messages)
        system: str | list[dict[str, Any]] = walk.system_value()
        turns = _plain(walk.turns)
    else:
        system, turns = "\n\n".join(plain[0]), plain[1]
    body: dict[str, Any] = {
        "model": config.model,
        "max_tokens": max_output_tokens(params) or config.default_max_tokens,
        "messages": turns,
    }
    if system:
        body["system"] = system
    if not problems:  # only valid params are translated
        _apply_params(body, params)
    return body, problems + walk.problems

"""The Gemini ``generateContent`` request built from the one internal ITEM shape (OpenAI-style
``messages`` + ``params``), and the params the kind takes.

Shapes from the API reference (https://ai.google.dev/api/generate-content): ``contents[{role: user |
model, parts[{text} | {inlineData} | {functionCall} | {functionResponse}]}]``, ``systemInstruction
{parts}``, ``generationConfig{maxOutputTokens, temperature (0–2), topP, stopSequences (at most 5),
candidateCount, presencePenalty, frequencyPenalty, seed, responseMimeType}``, ``tools
[{functionDeclarations[{name, description, parameters}]}]`` and ``toolConfig.functionCallingConfig
{mode: AUTO | ANY | NONE, allowedFunctionNames}`` (https://ai.google.dev/gemini-api/docs/function-calling).

``translate`` both builds the body and lists what cannot be mapped, so the check at submission and
the request sent agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..routing import ProviderConfig
from .base import ParamProblem
from .chat_shape import content_text, data_url, image_url, parsed_arguments
from .params import (
    Spec,
    check,
    forced_function,
    integer,
    max_output_tokens,
    number,
    response_format,
    stop_list,
    stops,
    tool_choice,
    tools,
)
from .translation import MessageWalk, plain_turns

PARAMS: Mapping[str, Spec] = {
    "max_tokens": integer(1),
    "max_completion_tokens": integer(1),
    "temperature": number(0, 2),
    "top_p": number(0, 1),
    "stop": stop_list(5),
    "n": integer(1, 8),
    "presence_penalty": number(-2, 2),
    "frequency_penalty": number(-2, 2),
    "seed": integer(-(2**31), 2**31 - 1),
    "response_format": response_format,
    "tools": tools,
    "tool_choice": tool_choice,
}
# OpenAI param → generationConfig field (values taken as they are)
_GENERATION = {
    "temperature": "temperature",
    "top_p": "topP",
    "n": "candidateCount",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "seed": "seed",
}
_ROLES = {"system": "system", "user": "user", "assistant": "model"}
_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
Parts = list[dict[str, Any]]


class _Walk(MessageWalk):
    """One pass over an item's messages: the system instruction, the contents, the problems."""

    system_target = "the system instruction"

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.contents: list[dict[str, Any]] = []
        self.call_names: dict[str, str] = {}  # tool_call id → function name (functionResponse needs it)

    def add(self, role: str, parts: Parts) -> None:
        if self.contents and self.contents[-1]["role"] == role:
            self.contents[-1]["parts"].extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})

    def user(self, field: str, content: Any) -> None:
        self.add("user", self.content_parts(field, content))

    def assistant(self, field: str, msg: dict[str, Any]) -> None:
        self.add("model", self.model_parts(field, msg))

    def tool(self, field: str, msg: dict[str, Any]) -> None:
        self.add("user", [self.function_response(field, msg)])

    def text_part(self, text: str) -> dict[str, Any]:
        return {"text": text}

    def part(self, field: str, part: Any) -> dict[str, Any] | None:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            return {"text": part["text"]}
        inline = data_url(image_url(part)) if kind == "image_url" else None
        if inline is not None:
            return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
        if kind == "image_url":
            self.refuse(field, "only data: image URLs map (a web URL needs a Gemini file upload)")
        else:
            self.refuse(field, f"content part type {kind!r} does not map (text and image_url do)")
        return None

    def model_parts(self, field: str, msg: dict[str, Any]) -> Parts:
        said = self.assistant_text(field, msg)
        parts: Parts = [{"text": said}] if said else []
        for j, call in enumerate(self.tool_calls(field, msg)):
            args = parsed_arguments(call)
            if args is None:
                self.refuse(f"{field}.tool_calls[{j}]", "needs a function name and JSON object arguments")
                continue
            name = call["function"]["name"]
            if isinstance(call.get("id"), str):
                self.call_names[call["id"]] = name
            parts.append({"functionCall": {"name": name, "args": args}})
        return parts

    def function_response(self, field: str, msg: dict[str, Any]) -> dict[str, Any]:
        said = content_text(msg.get("content"))
        call_id = msg.get("tool_call_id")
        name = self.call_names.get(call_id) if isinstance(call_id, str) else None
        if name is None or said is None:
            self.refuse(field, "a tool message needs text content and the tool_call_id of an earlier call")
        return {"functionResponse": {"name": name or "", "response": _response_object(said or "")}}


def _response_object(said: str) -> dict[str, Any]:
    """functionResponse.response must be an object: a JSON object result as it is, else wrapped."""
    try:
        value = json.loads(said)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"content": said}


def _generation_config(config: ProviderConfig, params: Mapping[str, Any]) -> dict[str, Any]:
    generation = {field: params[name] for name, field in _GENERATION.items() if name in params}
    cap = max_output_tokens(params)
    if cap is not None:
        generation["maxOutputTokens"] = cap
    if "stop" in params:
        generation["stopSequences"] = stops(params["stop"])
    if isinstance(params.get("response_format"), dict) and params["response_format"]["type"] == "json_object":
        generation["responseMimeType"] = "application/json"
    return generation


def _tools(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    declarations = []
    for tool in value:
        fn = tool["function"]
        entry: dict[str, Any] = {"name": fn["name"]}
        if fn.get("description"):
            entry["description"] = fn["description"]
        if fn.get("parameters"):
            entry["parameters"] = fn["parameters"]
        declarations.append(entry)
    return [{"functionDeclarations": declarations}]


def _tool_config(value: Any) -> dict[str, Any]:
    forced = forced_function(value)
    if forced is not None:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [forced]}}
    return {"functionCallingConfig": {"mode": _MODES[value]}}


def _apply_params(config: ProviderConfig, body: dict[str, Any], params: Mapping[str, Any]) -> None:
    generation = _generation_config(config, params)
    if generation:
        body["generationConfig"] = generation
    if params.get("tools"):
        body["tools"] = _tools(params["tools"])
    if "tool_choice" in params:
        body["toolConfig"] = _tool_config(params["tool_choice"])


def _content(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"text": text}]}


def translate(
    config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[ParamProblem]]:
    """(the generateContent body, every field that does not map). The model is in the URL."""
    params = params or {}
    problems = check(config, params, PARAMS)
    plain = plain_turns(messages, _ROLES, _content)
    walk = _Walk(config)
    if plain is None:
        walk.walk(messages)
        plain = walk.system, walk.contents
    system, contents = plain
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if not problems:
        _apply_params(config, body, params)
    return body, problems + walk.problems

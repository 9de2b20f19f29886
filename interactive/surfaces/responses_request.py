"""OpenAI's Responses API request (``POST /v1/responses``, stateless) as a chat request. Pure: the
``/v1/batches`` lines of ``"url": "/v1/responses"`` are read with it too (openai_api.conversion).

Shapes from the API reference (https://platform.openai.com/docs/api-reference/responses/create) and the
``openai`` SDK's ``types/responses``: ``input`` is a string (one user message) or a list of items —
messages (``role`` user / system / developer / assistant, ``content`` a string or parts ``input_text``,
``input_image``, ``output_text``, ``refusal``), ``function_call`` (an assistant's tool call, replayed)
and ``function_call_output`` (its result) —; ``instructions`` → a leading system message; ``tools``
(function tools ``{type, name, description, parameters, strict}``) → chat ``tools``; ``tool_choice``;
``text.format`` (``text``, ``json_object``, ``json_schema``) → ``response_format``;
``max_output_tokens`` → ``max_completion_tokens``; ``temperature``, ``top_p``, ``parallel_tool_calls``,
``user``, ``metadata`` (echoed only). Stateless: nothing is stored, so ``store`` may be true, false or
absent (OpenAI's default is true: such a response is simply not retrievable), and
``previous_response_id``, ``conversation`` and ``item_reference`` items, which need stored responses,
are refused naming the field; so is any other field the gateway does not carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ChatRequest, refused, stream_flag, unknown_fields

KNOWN = frozenset({"model", "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens",
                   "temperature", "top_p", "metadata", "store", "stream", "stream_options",
                   "parallel_tool_calls", "user", "truncation"})  # fmt: skip
STATEFUL = ("previous_response_id", "conversation")
# the chat request's fields as the Responses request names them (a refused chat field is reported so)
FIELD_NAMES = {"max_completion_tokens": "max_output_tokens", "max_tokens": "max_output_tokens",
               "response_format": "text.format", "messages": "input"}  # fmt: skip
_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text")


def chat_request(body: Mapping[str, Any]) -> ChatRequest:
    """The Responses body as a chat request (a CallError naming the first field that does not map)."""
    for name in STATEFUL:
        if body.get(name) is not None:
            raise refused(name, "the gateway keeps no responses (stateless): send the whole conversation "
                          "in input instead", "unsupported_parameter")  # fmt: skip
    unknown_fields(body, KNOWN, "POST /v1/responses")
    if "input" not in body:
        raise refused("input", "required", "missing_required_parameter")
    if body.get("truncation") not in (None, "disabled"):
        raise refused("truncation", "only 'disabled' (the gateway does not truncate)")
    messages = _instructions(body.get("instructions")) + input_messages(body["input"])
    params = _params(body)
    stream = stream_flag(body)
    options = body.get("stream_options")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise refused("stream_options", "an object, only with stream true")
    return ChatRequest(messages, params, stream, False, _echo(body))


def _instructions(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, str):
        raise refused("instructions", "must be a string", "invalid_type")
    return [{"role": "system", "content": value}]


def input_messages(value: Any) -> list[dict[str, Any]]:
    """``input`` as chat messages."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise refused("input", "must be a string or a non-empty list of input items", "invalid_type")
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise refused(where, "must be an object", "invalid_type")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(where, item))
        elif kind == "function_call":
            _function_call(where, item, messages)
        elif kind == "function_call_output":
            messages.append(_function_output(where, item))
        elif kind == "item_reference":
            raise refused(f"{where}.type", "item_reference needs stored items; the gateway keeps none")
        else:
            raise refused(f"{where}.type", f"{kind!r} does not map (message, function_call and "
                          "function_call_output do)")  # fmt: skip
    return messages


def _message(where: str, item: dict[str, Any]) -> dict[str, Any]:
    role = item.get("role")
    if role not in _ROLES:
        raise refused(f"{where}.role", f"must be one of {', '.join(_ROLES)}")
    for key in item:
        if key not in ("type", "role", "content", "id", "status"):
            raise refused(f"{where}.{key}", "unknown field of a message item", "unknown_parameter")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise refused(f"{where}.content", "must be a string or a list of content parts", "invalid_type")
    parts = [_part(f"{where}.content[{j}]", part) for j, part in enumerate(content)]
    if role == "assistant" or (role != "user" and all(p["type"] == "text" for p in parts)):
        return {"role": role, "content": "".join(p["text"] for p in parts if p["type"] == "text")}
    return {"role": role, "content": parts}


def _part(where: str, part: Any) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise refused(f"{where}.image_url", "an image URL or data: URL is required (file_id needs the "
                          "Files API, which the gateway does not serve for images)")  # fmt: skip
        image: dict[str, Any] = {"url": url}
        if part.get("detail") not in (None, "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise refused(where, f"content part type {kind!r} does not map (input_text, output_text, refusal and "
                  "input_image do)")  # fmt: skip


def _function_call(where: str, item: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    """A replayed tool call: onto the assistant message before it (a message item, then its calls)."""
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
    if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(arguments, str):
        raise refused(where, "a function_call item needs call_id, name and arguments (strings)")
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:  # the batch item rules want a string content ("" beside the calls)
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})


def _function_output(where: str, item: dict[str, Any]) -> dict[str, Any]:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str):
        raise refused(f"{where}.call_id", "required (the call_id of the function_call it answers)")
    if isinstance(output, list):
        texts = [p.get("text") for p in output if isinstance(p, dict) and p.get("type") == "input_text"]
        if len(texts) != len(output) or not all(isinstance(t, str) for t in texts):
            raise refused(f"{where}.output", "only text (a string or input_text parts) maps")
        output = "".join(texts)  # type: ignore[arg-type]
    if not isinstance(output, str):
        raise refused(f"{where}.output", "must be a string", "invalid_type")
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def _params(body: Mapping[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name in ("temperature", "top_p", "parallel_tool_calls", "user"):
        if body.get(name) is not None:
            params[name] = body[name]
    if body.get("max_output_tokens") is not None:
        params["max_completion_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        params["tools"] = chat_tools(body["tools"])
    if body.get("tool_choice") is not None:
        params["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("text") is not None:
        response_format = _text_format(body["text"])
        if response_format is not None:
            params["response_format"] = response_format
    _metadata(body.get("metadata"))
    return params


def chat_tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise refused("tools", "must be a list of function tools", "invalid_type")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise refused(f"tools[{i}].type", f"{kind!r} does not map: only function tools (the gateway "
                          "runs no built-in tools)")  # fmt: skip
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise refused(f"tools[{i}].name", "required", "missing_required_parameter")
        for key in tool:
            if key not in ("type", "name", "description", "parameters", "strict"):
                raise refused(f"tools[{i}].{key}", "unknown field of a function tool", "unknown_parameter")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(value: Any) -> Any:
    if value in ("auto", "none", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}
    raise refused("tool_choice", 'auto, none, required or {"type": "function", "name": …}')


def _text_format(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, dict) or set(text) - {"format"}:
        raise refused("text", "an object with format (verbosity and other settings do not map)")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
            raise refused("text.format", "json_schema needs a name and a schema object")
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if fmt.get(k) is not None}
        return {"type": "json_schema", "json_schema": schema}
    raise refused("text.format.type", "text, json_object or json_schema")


def _metadata(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or len(value) > 16:
        raise refused("metadata", "an object of at most 16 string values", "invalid_type")
    for key, item in value.items():
        if not isinstance(item, str) or len(key) > 64 or len(item) > 512:
            raise refused(f"metadata.{key}", "keys of at most 64 and string values of at most 512 characters")


def _echo(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the Response object repeats of the request."""
    keys = ("instructions", "metadata", "tools", "tool_choice", "temperature", "top_p", "max_output_tokens",
            "parallel_tool_calls", "text", "user", "store")  # fmt: skip
    return {k: body[k] for k in keys if body.get(k) is not None}

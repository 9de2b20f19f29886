"""The one answer shape apps read: an OpenAI ``chat.completion`` object built from another provider's
answer (docs/contract.md §4 RESULT ``response``), and the OpenAI message content an item sends.

Every kind's ``read_answer`` ends here, so ``choices[0].message.content``, ``finish_reason`` and
``usage`` look the same whichever provider answered; what a translation could not carry over is
listed in ``x_gateway_unmapped`` (only when something was left out) and stays in the native answer.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..answers import MAX_USAGE_TOKENS
from .base import Usage


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An OpenAI ``tool_calls`` entry; ``arguments`` (the provider's parsed object) as a JSON string."""
    encoded = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}


def choice(
    index: int, text: str | None, calls: list[dict[str, Any]], finish_reason: str | None
) -> dict[str, Any]:
    """One OpenAI choice. ``content`` is None only when the answer is tool calls and no text."""
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return {"index": index, "message": message, "finish_reason": finish_reason, "logprobs": None}


def normalized_usage(prompt: int, completion: int, cached: int = 0, cache_write: int = 0) -> Usage:
    """Usage in the engine's keys (wire.base.USAGE_KEYS) from counts already clamped
    (``answers.clamp_count``): ``prompt`` is ALL input (cached and cache writes included);
    cached_tokens / cache_write_tokens only when the provider reported some."""
    prompt, completion = min(prompt, MAX_USAGE_TOKENS), min(completion, MAX_USAGE_TOKENS)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": min(prompt + completion, MAX_USAGE_TOKENS),
    }
    if cached:
        usage["cached_tokens"] = min(cached, prompt)
    if cache_write:
        usage["cache_write_tokens"] = min(cache_write, prompt)
    return usage


def openai_usage(usage: Usage) -> dict[str, Any]:
    """The ``usage`` object of an OpenAI answer from normalized usage (cached reads as
    ``prompt_tokens_details.cached_tokens``, as OpenAI reports them)."""
    return {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "total_tokens": usage["total_tokens"],
        "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
    }


def chat_completion(
    answer_id: str,
    model: str,
    choices: list[dict[str, Any]],
    usage: Usage | None,
    unmapped: list[str],
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` object; ``x_gateway_unmapped`` lists what was left out."""
    response: dict[str, Any] = {
        "id": answer_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        response["usage"] = openai_usage(usage)
    if unmapped:
        response["x_gateway_unmapped"] = unmapped
    return response


def content_text(content: Any) -> str | None:
    """The text of OpenAI message content (a string, or a list of text parts), None if anything in
    it is not text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            return None
        texts.append(part["text"])
    return "\n".join(texts)


def data_url(url: Any) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:<type>;base64,<data>`` URL, else None."""
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return (head, data) if head and data else None


def image_url(part: dict[str, Any]) -> str | None:
    """The URL of an OpenAI ``image_url`` content part."""
    spec = part.get("image_url")
    url = spec.get("url") if isinstance(spec, dict) else spec
    return url if isinstance(url, str) and url else None


def parsed_arguments(call: Any) -> dict[str, Any] | None:
    """The arguments object of an OpenAI assistant ``tool_calls`` entry, None if unreadable."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return None
    raw = fn.get("arguments", "{}")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return args if isinstance(args, dict) else None

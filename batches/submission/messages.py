"""An item's content beyond its shape: a ``query`` that is not blank and fits an item, or at most
MAX_MESSAGES messages, each with a known role and string or content-part content."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .caps import MAX_CONTENT_PARTS, MAX_MESSAGES, MAX_PARAMS_DEPTH
from .json_values import depth, type_name

ROLES = frozenset({"system", "user", "assistant", "tool"})

# Reports one problem of the item being checked: (field, message).
Report = Callable[[str, str], None]


def query_messages(query: str, max_item_bytes: int, err: Report) -> list[Any]:
    """The one user message a ``query`` (already known to be a string) stands for; [] after a problem."""
    if not query.strip():
        err("query", "must not be empty")
    elif len(query) > max_item_bytes:
        err("query", f"is {len(query)} characters; at most {max_item_bytes} per item")
    else:
        return [{"role": "user", "content": query}]
    return []


def check_messages(messages: list[Any], err: Report) -> list[Any]:
    """Check a non-empty ``messages`` list; returns it, or [] when there are too many."""
    if len(messages) > MAX_MESSAGES:
        err("messages", f"{len(messages)} messages; at most {MAX_MESSAGES}")
        return []
    for k, message in enumerate(messages):
        _message(f"messages[{k}]", message, err)
    return messages


def _message(where: str, message: Any, err: Report) -> None:
    if not isinstance(message, dict):
        err(where, f"must be an object with 'role' and 'content', got {type_name(message)}")
        return
    role = message.get("role")
    if "role" not in message:
        err(f"{where}.role", f"required: one of {', '.join(sorted(ROLES))}")
    elif role not in ROLES:
        shown = role if isinstance(role, str) else type_name(role)
        err(f"{where}.role", f"{str(shown)[:50]!r} is not one of {', '.join(sorted(ROLES))}")
    if "content" not in message:
        err(f"{where}.content", "required: a string (or a list of content parts)")
    elif not isinstance(message["content"], str | list):
        err(
            f"{where}.content",
            f"must be a string or a list of content parts, got {type_name(message['content'])}",
        )
    elif isinstance(message["content"], list):
        _content_parts(f"{where}.content", message["content"], err)


def _content_parts(where: str, parts: list[Any], err: Report) -> None:
    """A list of at most MAX_CONTENT_PARTS objects, each with a string 'type', nested at most
    MAX_PARAMS_DEPTH levels (images, audio and text parts are flat objects)."""
    if len(parts) > MAX_CONTENT_PARTS:
        err(where, f"{len(parts)} content parts; at most {MAX_CONTENT_PARTS}")
        return
    for k, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            err(f"{where}[{k}]", "must be an object with a string 'type'")
            return
        if depth(part, MAX_PARAMS_DEPTH) > MAX_PARAMS_DEPTH:
            err(f"{where}[{k}]", f"nested deeper than {MAX_PARAMS_DEPTH} levels")
            return

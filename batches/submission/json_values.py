"""Small checks on decoded JSON values shared by parsing and validation: type names for messages,
nesting depth, NUL and lone-surrogate detection, the one shared encoder, parse-problem wording."""

from __future__ import annotations

import json
from typing import Any

# One shared encoder: json.dumps() with non-default options builds a new encoder on every call.
ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def reject_constant(name: str) -> None:
    # Python's json accepts NaN/Infinity, which are not JSON (and PostgreSQL jsonb refuses them).
    raise ValueError(f"{name} is not a valid JSON value")


def parse_problem(exc: BaseException) -> str:
    """What went wrong while decoding or encoding JSON, in a few words."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, UnicodeDecodeError):
        return "not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def contains_nul(value: Any) -> bool:
    """Any NUL in any string (keys too), however deep (iterative: no recursion limit)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if "\x00" in current:
                return True
        elif isinstance(current, dict):
            stack.extend(current.keys())
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


def depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counting at most to ``limit + 1`` (iterative)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        current, level = stack.pop()
        if isinstance(current, dict | list):
            level += 1
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((v, level) for v in (current.values() if isinstance(current, dict) else current))
    return deepest


def type_name(value: Any) -> str:
    """How a message names a JSON value's type ("null", "a string", "an object", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__

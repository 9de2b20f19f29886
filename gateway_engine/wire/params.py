"""Which item params a provider kind takes, in which ranges, and the one sentence a refusal says.

A kind that is not OpenAI-compatible declares a table ``{param name: Spec}``; ``check`` refuses every
other param and every value its spec does not take, each as a ``ParamProblem`` naming the field and
the provider (``params.temperature: 1.5 is above 1 for provider 'claude' (kind anthropic)``), so a
submission is refused before anything is sent instead of failing later at the provider. The request
translators (``wire.anthropic_request``, ``wire.gemini_request``) report content they cannot map in
the same form; ``RequestProblems`` carries them when a body is built anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..routing import ProviderConfig
from .base import ParamProblem

# a spec looks at a value and returns what is wrong with it ("1.5 is above 1") or None
Spec = Callable[[Any], "str | None"]


class RequestProblems(ValueError):
    """A request that cannot be translated for its provider (submission should have refused it):
    the problems name each field."""

    def __init__(self, problems: list[ParamProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))


def where(config: ProviderConfig) -> str:
    """The provider part of every refusal: ``for provider 'claude' (kind anthropic)``."""
    return f"for provider {config.name!r} (kind {config.kind})"


def not_taken(config: ProviderConfig) -> str:
    """The refusal of a param the kind has no such thing for."""
    return f"not taken by provider {config.name!r} (kind {config.kind})"


def problem(config: ProviderConfig, field: str, what: str) -> ParamProblem:
    return ParamProblem(field, f"{what} {where(config)}")


def check(config: ProviderConfig, params: Mapping[str, Any], table: Mapping[str, Spec]) -> list[ParamProblem]:
    """Every param of ``params`` the table does not take (unknown, wrong type, out of range)."""
    problems = []
    for name, value in params.items():
        spec = table.get(name)
        if spec is None:
            problems.append(ParamProblem(f"params.{name}", not_taken(config)))
            continue
        wrong = spec(value)
        if wrong is not None:
            problems.append(problem(config, f"params.{name}", wrong))
    return problems


def _fmt(number: float) -> str:
    return f"{number:g}"


def number(low: float, high: float) -> Spec:
    """A finite number in [low, high] (an int counts; a bool does not)."""

    def spec(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{value!r} is not a number"
        if value < low:
            return f"{_fmt(value)} is below {_fmt(low)}"
        if value > high:
            return f"{_fmt(value)} is above {_fmt(high)}"
        return None

    return spec


def integer(low: int, high: int | None = None) -> Spec:
    """A whole number in [low, high] (high None: no upper bound)."""

    def spec(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{value!r} is not an integer"
        if value < low:
            return f"{value} is below {low}"
        if high is not None and value > high:
            return f"{value} is above {high}"
        return None

    return spec


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"{value!r} is not a string"


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{value!r} is not true or false"


def stop_list(most: int | None = None) -> Spec:
    """OpenAI ``stop``: a string or a list of strings (at most ``most`` of them)."""

    def spec(value: Any) -> str | None:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items):
            return "must be a non-empty string or a list of non-empty strings"
        if most is not None and len(items) > most:
            return f"{len(items)} stop sequences, more than {most}"
        return None

    return spec


def stops(value: Any) -> list[str]:
    """The stop sequences of a ``stop`` param (checked by ``stop_list``)."""
    return [value] if isinstance(value, str) else list(value)


def tools(value: Any) -> str | None:
    """OpenAI ``tools``: a list of ``{"type": "function", "function": {"name": str, …}}``."""
    if not isinstance(value, list):
        return "must be a list of function tools"
    for i, tool in enumerate(value):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            return f"tool {i} is not a function tool (only type function maps)"
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            return f"tool {i} has no function name"
        if not isinstance(fn.get("parameters", {}), dict):
            return f"tool {i}: function.parameters is not a JSON schema object"
    return None


def tool_choice(value: Any) -> str | None:
    """OpenAI ``tool_choice``: auto / none / required, or one named function."""
    if value in ("auto", "none", "required"):
        return None
    if isinstance(value, dict) and value.get("type") == "function":
        fn = value.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"]:
            return None
    return f"{value!r} is not auto, none, required or a named function"


def forced_function(value: Any) -> str | None:
    """The function a ``tool_choice`` names, else None."""
    return value["function"]["name"] if isinstance(value, dict) else None


def response_format(value: Any) -> str | None:
    """OpenAI ``response_format`` where only text and json_object map (not json_schema)."""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in ("text", "json_object"):
        return None
    return f"type {kind!r} does not map (only text and json_object)"


def max_output_tokens(params: Mapping[str, Any]) -> int | None:
    """The output-token cap an item asks for: ``max_completion_tokens`` (OpenAI's current name) or
    ``max_tokens``; None if it gives none."""
    value = params.get("max_completion_tokens", params.get("max_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None

"""What every kind whose request is a *translation* of the one ITEM shape shares (``anthropic``,
``gemini``): the walk over OpenAI-style messages, the fast path for the common item, and the three
wire methods built on the kind's ``translate``.

A kind's ``translate(config, messages, params)`` returns (body, problems); ``checked_body`` refuses to
send a body with problems (``RequestProblems``), ``param_problems`` / ``message_problems`` are the
submission checks — one function behind both, so the check and the request sent never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..routing import ProviderConfig
from .base import ParamProblem
from .chat_shape import content_text
from .openai import without_reserved
from .params import RequestProblems, problem

Translate = Callable[
    [ProviderConfig, list[Any], Mapping[str, Any] | None], tuple[dict[str, Any], list[ParamProblem]]
]
Part = dict[str, Any]


def checked_body(
    translate: Translate, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The request body; RequestProblems when anything would be lost (submission refuses those)."""
    payload, problems = translate(config, messages, without_reserved(params))
    if problems:  # never send a request that silently lost a field
        raise RequestProblems(problems)
    return payload


def param_problems(
    translate: Translate, config: ProviderConfig, params: Mapping[str, Any]
) -> list[ParamProblem]:
    return translate(config, [], without_reserved(params))[1]


def message_problems(translate: Translate, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
    return translate(config, messages, None)[1]


def plain_turns(
    messages: list[Any], roles: Mapping[str, str], turn: Callable[[str, str], dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]] | None:
    """The common item — string contents, system first, then alternating turns — translated directly
    (a batch's usual shape; the general walk costs several times more): (system texts, turns), each
    turn ``turn(api_role, text)``; ``roles`` maps OpenAI roles to the API's (``system`` to itself).
    None when anything else is in the messages (the caller walks them with a MessageWalk)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for msg in messages:
        if type(msg) is not dict or len(msg) != 2 or type(msg.get("content")) is not str:
            return None
        name = msg["role"] if "role" in msg else None
        role = roles.get(name) if type(name) is str else None
        if role == "system" and not turns:
            system.append(msg["content"])
        elif role is not None and role != "system" and (not turns or turns[-1]["role"] != role):
            turns.append(turn(role, msg["content"]))
        else:
            return None
    return system, turns


class MessageWalk:
    """One pass over an item's OpenAI-style messages: the system texts, the API's own turns (built by
    the subclass: ``user``, ``assistant``, ``tool``, ``part``, ``text_part``) and every field that does
    not map (``problems``, each naming the field and the provider)."""

    system_target = "the system prompt"  # what system messages become, in refusals

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.system: list[str] = []
        self.problems: list[ParamProblem] = []

    def refuse(self, field: str, what: str) -> None:
        self.problems.append(problem(self.config, field, what))

    def walk(self, messages: list[Any]) -> None:
        for i, msg in enumerate(messages):
            self.message(i, msg)

    def message(self, i: int, msg: Any) -> None:
        field = f"messages[{i}]"
        role = msg.get("role") if isinstance(msg, dict) else None
        if role in ("system", "developer", "user", "assistant") and "name" in msg:
            self.refuse(f"{field}.name", "participant names do not map")
        if role in ("system", "developer"):
            prompt = content_text(msg.get("content"))
            if prompt is None:
                self.refuse(f"{field}.content", f"only text maps to {self.system_target}")
            else:
                self.system.append(prompt)
        elif role == "user":
            self.user(field, msg.get("content"))
        elif role == "assistant":
            self.assistant(field, msg)
        elif role == "tool":
            self.tool(field, msg)
        else:
            self.refuse(f"{field}.role", f"{role!r} does not map (system, user, assistant, tool)")

    def content_parts(self, field: str, content: Any) -> list[Part]:
        """A user message's content (a string or OpenAI content parts) as the API's parts."""
        if isinstance(content, str):
            return [self.text_part(content)]
        if not isinstance(content, list):
            self.refuse(f"{field}.content", "is neither a string nor a list of content parts")
            return []
        return [p for j, part in enumerate(content) if (p := self.part(f"{field}.content[{j}]", part))]

    def assistant_text(self, field: str, msg: dict[str, Any]) -> str:
        """An assistant message's text ("" when it has none or only tool calls)."""
        content = msg.get("content")
        if content in (None, ""):
            return ""
        said = content_text(content)
        if said is None:
            self.refuse(f"{field}.content", "only text maps in an assistant message")
        return said or ""

    def tool_calls(self, field: str, msg: dict[str, Any]) -> list[Any]:
        """An assistant message's ``tool_calls`` ([] when absent or not a list, the latter refused)."""
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list):
            self.refuse(f"{field}.tool_calls", "is not a list of tool calls")
            return []
        return calls

    # ---- the API's own turns and parts (the subclass) ------------------------------------------------

    def user(self, field: str, content: Any) -> None:
        raise NotImplementedError

    def assistant(self, field: str, msg: dict[str, Any]) -> None:
        raise NotImplementedError

    def tool(self, field: str, msg: dict[str, Any]) -> None:
        raise NotImplementedError

    def text_part(self, text: str) -> Part:
        raise NotImplementedError

    def part(self, field: str, part: Any) -> Part | None:
        raise NotImplementedError

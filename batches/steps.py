"""Pipelines (docs/contract.md §4 "steps"): a batch's steps, the one user message each step sends, the
route ``route_by`` picks, and an item's pipeline record. Pure values: no database, no settings.

A pipeline item's record (``BatchItem.pipeline``) holds what the steps after the first need and what
the RESULT shows of the steps already run::

    {"input": "<the item's query or last user message>", "route": own route, "provider": own provider,
     "params": {own params}, "step": "<name of the step the row is at>",
     "steps": [{"name", "ok", "provider", "attempts", "latency_ms", "response", "error", "usage",
                "served_by"}, …],
     "stats": [{"provider", "served_by", "attempt_log", "prompt_tokens", "completion_tokens",
                "retry_extra_tokens"}, …]}

The row's own route, payload and result columns are the current step's (``BatchItem.step_index``), so
the dispatcher, the engine and the result writer treat a step like any item. ``steps`` is what the
RESULT shows of each finished step; ``stats`` (one entry per finished step, without its answer) is what
the batch's stats count of it (batches.execution.steps ``add_earlier_steps``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

INPUT = "input"
STEP_PREFIX = "steps."
DEFAULT_TEMPLATE = "{input}"
ANY_ANSWER = "*"  # route_by's default
# {{ and }} are literal braces; {name} a placeholder (``input`` or ``steps.<earlier step>``)
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
LITERAL_BRACES = {"{{": "{", "}}": "}"}
# what the RESULT's ``steps`` shows of each step (the RESULT's own keys; custom_id and status left out)
PUBLIC_KEYS = ("name", "ok", "provider", "attempts", "latency_ms", "response", "error", "usage", "served_by")


@dataclass(frozen=True)
class Step:
    """One step as checked at submission (batches.submission.steps) and stored on ``Batch.steps``."""

    name: str
    route: str = ""
    provider: str = ""
    template: str = DEFAULT_TEMPLATE
    params: Mapping[str, Any] = field(default_factory=dict)
    route_by: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "template": self.template, "params": dict(self.params)}
        if self.route:
            out["route"] = self.route
        if self.provider:
            out["provider"] = self.provider
        if self.route_by:
            out["route_by"] = dict(self.route_by)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Step:
        return cls(
            name=str(raw["name"]),
            route=str(raw.get("route") or ""),
            provider=str(raw.get("provider") or ""),
            template=str(raw.get("template") or DEFAULT_TEMPLATE),
            params=dict(raw.get("params") or {}),
            route_by={str(k): str(v) for k, v in (raw.get("route_by") or {}).items()},
        )


def steps_of(raw: Sequence[Mapping[str, Any]] | None) -> tuple[Step, ...]:
    """``Batch.steps`` as Step values (() for a batch without steps)."""
    return tuple(Step.from_dict(s) for s in raw or ())


def placeholders(template: str) -> list[str]:
    """The names inside ``{…}`` of a template, in order (literal ``{{``/``}}`` are none)."""
    return [m.group(1) for m in PLACEHOLDER.finditer(template) if m.group(1) is not None]


def render(template: str, input_text: str, answers: Mapping[str, str]) -> str:
    """The step's message: ``{input}`` → the item's input, ``{steps.<name>}`` → that step's answer text
    (an unknown name is refused at submission; here it becomes "")."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return LITERAL_BRACES[match.group(0)]
        if name == INPUT:
            return input_text
        return answers.get(name.removeprefix(STEP_PREFIX), "")

    return PLACEHOLDER.sub(sub, template)


def normalized(answer: str) -> str:
    """An answer as ``route_by`` compares it: trimmed, case-folded."""
    return answer.strip().casefold()


def routed_by(step: Step, previous_answer: str) -> str | None:
    """The route ``route_by`` picks for ``step`` from the previous step's answer, or None (no
    ``route_by``, or no key matched and no ``*``: the step's own target, else the item's)."""
    if not step.route_by:
        return None
    answer = normalized(previous_answer)
    for key, route in step.route_by.items():
        if key != ANY_ANSWER and normalized(key) == answer:
            return route
    return step.route_by.get(ANY_ANSWER)


def answer_text(response: Any) -> str:
    """The text of an OpenAI chat.completion's first choice ("" when there is none)."""
    try:
        content = response["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def input_text(messages: Sequence[Any]) -> str:
    """An item's ``{input}``: its last user message's text (a ``query`` is one user message)."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return answer_text({"choices": [{"message": {"content": content}}]})
    return ""


def new_record(
    messages: Sequence[Any], params: Mapping[str, Any], route: str, provider: str, first: Step
) -> dict[str, Any]:
    """A pipeline item's record at submission (nothing run yet)."""
    return {
        "input": input_text(messages),
        "route": route,
        "provider": provider,
        "params": dict(params),
        "step": first.name,
        "steps": [],
        "stats": [],
    }


def answers_of(record: Mapping[str, Any]) -> dict[str, str]:
    """{step name: answer text} of the steps the record has finished."""
    return {s["name"]: answer_text(s.get("response")) for s in record.get("steps") or ()}


def target_of(step: Step, record: Mapping[str, Any], previous_answer: str = "") -> tuple[str, str]:
    """(route, provider) of ``step`` for an item: ``route_by``'s pick, else the step's own, else the item's."""
    chosen = routed_by(step, previous_answer)
    if chosen is not None:
        return chosen, ""
    if step.route or step.provider:
        return step.route, step.provider
    return str(record.get("route") or ""), str(record.get("provider") or "")


def payload_of(step: Step, record: Mapping[str, Any]) -> dict[str, Any]:
    """The step's payload: one user message from its template, the item's params under the step's."""
    text = render(step.template, str(record.get("input") or ""), answers_of(record))
    return {
        "messages": [{"role": "user", "content": text}],
        "params": {**(record.get("params") or {}), **step.params},
    }


def public_steps(record: Mapping[str, Any], current: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The RESULT's ``steps``: each finished step, then the one the row is at (``current``: the RESULT
    built from the row's columns, whose top-level fields describe that step)."""
    done = [{k: s.get(k) for k in PUBLIC_KEYS} for s in record.get("steps") or ()]
    last = {"name": record.get("step") or "", **{k: current.get(k) for k in PUBLIC_KEYS[1:]}}
    return [*done, last]

"""The Amazon Bedrock Converse request built from the one internal ITEM shape (OpenAI-style ``messages``
+ ``params``), and the params the kind takes.

Shapes from the Converse API reference (https://docs.aws.amazon.com/bedrock/latest/APIReference/
API_runtime_Converse.html; botocore's bedrock-runtime service model): the model id is in the URL, not
the body; ``messages[{role: user|assistant, content: [{text}]}]`` alternate, starting with a user turn;
``system[{text}]``; ``inferenceConfig{maxTokens ≥ 1, temperature 0–1, topP 0–1, stopSequences}``.
Text only here: images, tools and tool results are refused at submission, naming the field.

One function, ``translate``, both builds the body and lists what cannot be mapped, so the check at
submission and the request sent never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..routing import ProviderConfig
from .base import ParamProblem
from .params import Spec, check, integer, max_output_tokens, number, problem, stop_list, stops
from .translation import MessageWalk, plain_turns

PARAMS: Mapping[str, Spec] = {
    "max_tokens": integer(1),
    "max_completion_tokens": integer(1),
    "temperature": number(0, 1),
    "top_p": number(0, 1),
    "stop": stop_list(2500),
}
_ROLES = {"system": "system", "user": "user", "assistant": "assistant"}


def _turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"text": text}]}


class _Walk(MessageWalk):
    """One pass over an item's messages: the system texts, the turns (consecutive turns of one role
    merged: Converse wants them alternating), the problems."""

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.turns: list[dict[str, Any]] = []

    def add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if self.turns and self.turns[-1]["role"] == role:
            self.turns[-1]["content"].extend(blocks)
        else:
            self.turns.append({"role": role, "content": blocks})

    def user(self, field: str, content: Any) -> None:
        self.add("user", self.content_parts(field, content))

    def assistant(self, field: str, msg: dict[str, Any]) -> None:
        if msg.get("tool_calls"):
            self.refuse(f"{field}.tool_calls", "tool calls do not map (text only)")
        said = self.assistant_text(field, msg)
        self.add("assistant", [{"text": said}] if said else [])

    def tool(self, field: str, msg: dict[str, Any]) -> None:
        self.refuse(f"{field}.role", "tool messages do not map (text only)")

    def text_part(self, text: str) -> dict[str, Any]:
        return {"text": text}

    def part(self, field: str, part: Any) -> dict[str, Any] | None:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            return {"text": part["text"]}
        self.refuse(field, f"content part type {kind!r} does not map (text does)")
        return None


def _turn_problems(config: ProviderConfig, turns: list[dict[str, Any]]) -> list[ParamProblem]:
    """What Converse refuses about the turns themselves (a first turn not the user's, an empty turn)."""
    problems = []
    if turns and turns[0]["role"] != "user":
        problems.append(problem(config, "messages", "the first non-system message must be the user's"))
    for i, turn in enumerate(turns):
        if not turn["content"] or any(block.get("text") == "" for block in turn["content"]):
            problems.append(problem(config, f"messages (turn {i})", "an empty message does not map"))
    return problems


def inference_config(config: ProviderConfig, params: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"maxTokens": max_output_tokens(params) or config.default_max_tokens}
    if "temperature" in params:
        out["temperature"] = params["temperature"]
    if "top_p" in params:
        out["topP"] = params["top_p"]
    if "stop" in params:
        out["stopSequences"] = stops(params["stop"])
    return out


def translate(
    config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[ParamProblem]]:
    """(the Converse body, every field that does not map). ``inferenceConfig.maxTokens`` is the item's
    ``max_completion_tokens`` / ``max_tokens``, else the provider's ``default_max_tokens``."""
    params = params or {}
    problems = check(config, params, PARAMS)
    plain = plain_turns(messages, _ROLES, _turn)
    walk = _Walk(config)
    if plain is None:
        walk.walk(messages)
        system, turns = walk.system, walk.turns
    else:
        system, turns = plain
    body: dict[str, Any] = {"messages": turns}
    if system:
        body["system"] = [{"text": text} for text in system if text]
    body["inferenceConfig"] = inference_config(config, params if not problems else {})
    turn_problems = _turn_problems(config, turns) if messages and not walk.problems else []
    return body, problems + walk.problems + turn_problems

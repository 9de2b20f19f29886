"""The ``steps`` batch option (docs/contract.md §4 "Pipelines"), checked at submission against the
routes and providers known now: names unique, targets known, templates naming only ``{input}`` and
earlier steps, ``route_by`` naming known routes, params as the step's providers take them. Every
problem names the step and the field (``steps[1].template``); nothing is stored when there is one.

Pure: the known targets are passed in (``KnownTargets``). The items of a batch with steps are then
put at their first step by ``pipeline_items``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from batches.models import ProviderBatchMode
from batches.steps import ANY_ANSWER, INPUT, STEP_PREFIX, Step, normalized, placeholders
from gateway_engine.wire.openai import RESERVED_PARAMS

from .caps import MAX_NAME_CHARS, MAX_PARAMS_DEPTH
from .errors import FieldError, SubmissionError
from .json_values import depth, parse_problem, reject_constant, type_name
from .targets import KnownTargets, unknown_provider, unknown_route

MAX_STEPS = 10
MAX_TEMPLATE_CHARS = 100_000
STEP_FIELDS = frozenset({"name", "route", "provider", "template", "params", "route_by"})
STEP_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
# a stand-in message for the params checks (a step's text is known only when it runs)
PROBE_MESSAGES: list[Any] = [{"role": "user", "content": "x"}]


class StepChecker:
    """Checks one ``steps`` list, collecting every problem (``errors``)."""

    def __init__(self, targets: KnownTargets):
        self.targets = targets
        self.errors: list[FieldError] = []
        self.names: list[str] = []  # the steps checked so far (the earlier ones)
        self.all_names: set[str] = set()

    def err(self, where: str, message: str) -> None:
        self.errors.append(FieldError(None, where, message))

    def steps(self, raw: Any) -> tuple[Step, ...]:
        if not isinstance(raw, list):
            self.err("steps", f"must be a list of steps, got {type_name(raw)}")
            return ()
        if not 1 <= len(raw) <= MAX_STEPS:
            self.err("steps", f"{len(raw)} steps; give 1 to {MAX_STEPS}")
            return ()
        self.all_names = {str(s.get("name")) for s in raw if isinstance(s, dict)}
        out = [self.step(i, s) for i, s in enumerate(raw)]
        return tuple(s for s in out if s is not None) if not self.errors else ()

    def step(self, i: int, raw: Any) -> Step | None:
        where = f"steps[{i}]"
        if not isinstance(raw, dict):
            self.err(where, f"must be an object, got {type_name(raw)}")
            return None
        for key in raw:
            if key not in STEP_FIELDS:
                self.err(
                    f"{where}.{str(key)[:100]}", f"unknown field; allowed: {', '.join(sorted(STEP_FIELDS))}"
                )
        name = self._name(where, raw.get("name"))
        route, provider = self._target(where, raw)
        template = self._template(where, raw.get("template", "{input}"))
        params = self._params(where, raw.get("params", {}))
        route_by = self._route_by(i, where, raw.get("route_by"))
        if name:
            self.names.append(name)
        step = Step(name or "", route, provider, template, params, route_by)
        if params and not self.errors:
            self._reachable_params(where, step)
        return step

    def _name(self, where: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            self.err(f"{where}.name", "required: a non-empty string")
            return ""
        if len(value) > MAX_NAME_CHARS or not STEP_NAME.match(value):
            self.err(f"{where}.name", f"must be 1 to {MAX_NAME_CHARS} letters, digits, '_' or '-'")
            return ""
        if value in self.names:
            self.err(f"{where}.name", f"duplicate step name {value!r}")
            return ""
        return value

    def _target(self, where: str, raw: Mapping[str, Any]) -> tuple[str, str]:
        if "route" in raw and "provider" in raw:
            self.err(f"{where}.route", "give at most one of 'route' or 'provider', not both")
            return "", ""
        if "route" in raw:
            return self._route(f"{where}.route", raw["route"]), ""
        if "provider" in raw:
            return "", self._provider(f"{where}.provider", raw["provider"])
        return "", ""

    def _route(self, where: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            self.err(where, f"must be a non-empty string, got {type_name(value)}")
            return ""
        if value not in self.targets.routes:
            self.err(where, unknown_route(value, self.targets))
        return value

    def _provider(self, where: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            self.err(where, f"must be a non-empty string, got {type_name(value)}")
            return ""
        enabled = self.targets.providers.get(value)
        if enabled is None:
            self.err(where, unknown_provider(value, self.targets))
        elif not enabled:
            self.err(where, f"provider {value!r} is disabled")
        return value

    def _template(self, where: str, value: Any) -> str:
        where = f"{where}.template"
        if not isinstance(value, str) or not value.strip():
            self.err(where, "must be a non-empty string")
            return ""
        if len(value) > MAX_TEMPLATE_CHARS:
            self.err(where, f"is {len(value)} characters; at most {MAX_TEMPLATE_CHARS}")
            return value
        earlier = ", ".join(self.names) or "none"
        for name in placeholders(value):
            if name == INPUT:
                continue
            if not name.startswith(STEP_PREFIX):
                self.err(where, f"unknown placeholder {{{name}}}: use {{input}} or {{steps.<earlier step>}}")
            elif (step := name.removeprefix(STEP_PREFIX)) not in self.names:
                problem = f"step {step!r} runs later" if step in self.all_names else f"unknown step {step!r}"
                self.err(where, f"{problem} (earlier steps: {earlier})")
        return value

    def _params(self, where: str, value: Any) -> dict[str, Any]:
        where = f"{where}.params"
        if not isinstance(value, dict):
            self.err(where, f"must be an object, got {type_name(value)}")
            return {}
        for key in value:
            if key in RESERVED_PARAMS:
                self.err(f"{where}.{key}", "is set by the gateway; remove it")
        if depth(value, MAX_PARAMS_DEPTH) > MAX_PARAMS_DEPTH:
            self.err(where, f"nested deeper than {MAX_PARAMS_DEPTH} levels")
        if "max_tokens" in value:
            tokens = value["max_tokens"]
            if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
                self.err(f"{where}.max_tokens", "must be a positive integer")
        return value

    def _route_by(self, i: int, where: str, value: Any) -> dict[str, str]:
        where = f"{where}.route_by"
        if value is None:
            return {}
        if i == 0:
            self.err(where, "the first step has no previous answer to route by")
            return {}
        if not isinstance(value, dict) or not value:
            self.err(where, 'must be a non-empty object {answer: route, …, "*": default route}')
            return {}
        out: dict[str, str] = {}
        seen: dict[str, str] = {}  # answers as compared (trimmed, case-folded) → as given
        for answer, route in value.items():
            key = normalized(answer)
            if not key:
                self.err(where, 'an answer must not be empty (use "*" for the default)')
            elif key in seen:
                self.err(
                    f"{where}.{answer[:100]}",
                    f"the same answer as {seen[key]!r} once trimmed and case-folded",
                )
            seen.setdefault(key, answer)
            out[answer] = self._route(f"{where}.{answer[:100]}", route)
        return out

    def _reachable_params(self, where: str, step: Step) -> None:
        """What the providers the step can reach refuse in its params."""
        reached = [(route, "") for route in step.route_by.values()]
        if step.route or step.provider:
            reached.append((step.route, step.provider))
        for route, provider in reached:
            for field_name, message in self.targets.reach.refusals(
                route, provider, PROBE_MESSAGES, step.params
            ):
                self.err(f"{where}.{field_name}", message)


def check_steps(raw: Any, targets: KnownTargets) -> tuple[Step, ...]:
    """The batch's steps (() when ``raw`` is None: no pipeline); raise SubmissionError(400) naming each
    bad step and field."""
    if raw is None:
        return ()
    checker = StepChecker(targets)
    steps = checker.steps(raw)
    if checker.errors:
        raise SubmissionError(400, checker.errors)
    return steps


def untargeted(steps: tuple[Step, ...]) -> list[str]:
    """The steps that send to the item's own route or provider: no target of their own and no
    ``route_by`` default."""
    return [s.name for s in steps if not (s.route or s.provider) and ANY_ANSWER not in s.route_by]


def steps_query(value: str | None) -> Any:
    """A JSONL body's ``steps`` query parameter: the steps list as JSON text (None: not given)."""
    if value is None or value == "":
        return None
    try:
        return json.loads(value, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        raise SubmissionError(
            400, [FieldError(None, "steps", f"not valid JSON: {parse_problem(exc)}")]
        ) from None


def real_time_only(provider_batch: str) -> str:
    """A pipeline's ``provider_batch``: ``never`` (each step is sent when the one before it ended, in
    real time); ``always`` is refused naming the field (never turned into real time silently)."""
    if provider_batch == ProviderBatchMode.ALWAYS:
        message = "'always' cannot go with steps: each step is sent in real time when the one before it ends"
        raise SubmissionError(400, [FieldError(None, "provider_batch", message)])
    return ProviderBatchMode.NEVER.value

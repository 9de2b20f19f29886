"""The items of a batch with ``steps``, put at their first step: each gets its pipeline record (its own
input, target and params: batches.steps), the first step's target and its one user message as the
payload. Items that cannot run every step (no target where a step needs the item's, params a step's
providers refuse, an embeddings item) are refused naming the item and the field. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from batches.steps import INPUT, Step, input_text, new_record, payload_of, placeholders, target_of

from .errors import MAX_ERRORS, FieldError, SubmissionError
from .json_values import ENCODER
from .steps import PROBE_MESSAGES, untargeted
from .targets import KnownTargets
from .validation import ValidItem

CHAT = "chat"


def pipeline_items(
    items: Sequence[Any], valid: Sequence[ValidItem], steps: tuple[Step, ...], targets: KnownTargets
) -> list[ValidItem]:
    """``valid`` (the checked ``items``) at their first step; raise SubmissionError(400) naming each item
    that cannot run the steps."""
    needs_own = untargeted(steps)
    errors: list[FieldError] = []
    count = 0
    out: list[ValidItem] = []
    for v in valid:
        problems = _problems(items[v.seq], v, steps, needs_own, targets)
        count += len(problems)
        errors.extend(problems[: max(0, MAX_ERRORS - len(errors))])
        if not problems:
            out.append(_first_step(v, steps))
    if count:
        raise SubmissionError(400, errors, count)
    return out


def _problems(
    raw: Any, v: ValidItem, steps: tuple[Step, ...], needs_own: list[str], targets: KnownTargets
) -> list[FieldError]:
    i = v.seq
    if isinstance(raw, dict) and raw.get("endpoint", CHAT) != CHAT:
        return [FieldError(i, "endpoint", "a batch with steps takes chat items only")]
    if needs_own and not (v.route or v.provider):
        names = ", ".join(repr(n) for n in needs_own)
        return [
            FieldError(
                i, "route", f"one of 'route' or 'provider' is required: step {names} has none of its own"
            )
        ]
    if not input_text(v.payload.get("messages") or []) and any(
        INPUT in placeholders(s.template) for s in steps
    ):
        return [
            FieldError(
                i,
                "messages",
                "a batch with steps reads the item's last user message as {input}: it has none (or no text)",
            )
        ]
    params = v.payload.get("params") or {}
    if not params:
        return []
    out = []
    for step in steps:  # the item's params go with every step, under the step's own
        merged = {**params, **step.params}
        for route, provider in _reached(step, v):
            for field_name, message in targets.reach.refusals(route, provider, PROBE_MESSAGES, merged):
                out.append(FieldError(i, field_name, f"step {step.name!r}: {message}"))
    return out


def _reached(step: Step, v: ValidItem) -> list[tuple[str, str]]:
    """The (route, provider) pairs a step of this item may be sent to."""
    reached = [(route, "") for route in step.route_by.values()]
    if step.route or step.provider:
        reached.append((step.route, step.provider))
    elif v.route or v.provider:
        reached.append((v.route, v.provider))
    return list(dict.fromkeys(reached))


def _first_step(v: ValidItem, steps: tuple[Step, ...]) -> ValidItem:
    first = steps[0]
    record = new_record(
        v.payload.get("messages") or [], v.payload.get("params") or {}, v.route, v.provider, first
    )
    route, provider = target_of(first, record)
    payload = payload_of(first, record)
    return dataclasses.replace(
        v,
        route=route,
        provider=provider,
        payload=payload,
        payload_json=ENCODER.encode(payload),
        pipeline=record,
    )


def step_payloads(valid: Sequence[ValidItem], steps: tuple[Step, ...]) -> Iterator[dict[str, Any]]:
    """What every step of every item (at their first step) may send, for the budget estimate: each
    step's template over the item's input (an earlier step's answer is not known yet: counted as its
    ``max_tokens`` is, in that step's estimate) and the step's params over the item's."""
    for v in valid:
        record = v.pipeline or {}
        for step in steps:
            yield payload_of(step, record)

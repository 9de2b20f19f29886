"""The ``targets`` batch option (an evaluation, docs/contract.md §4): checked at submission, and every
checked item fanned out to one copy per target. Pure: the known routes and providers are passed in.

A copy is an ordinary item: its route (or provider) is the target, its ``custom_id`` the item's own
with ``"@<target>"`` appended (unique in the batch, the key the engine, the journal and the provider
batch files use), its ``target`` the name, its ``seq`` ``item seq × len(targets) + target index`` (the
copies of one item side by side, in the targets' order). So each copy is queued at its target's
provider, shaped by that provider's quota, and counted by the budget and queue-limit checks like any
item; the batch's counts count copies (``total`` = items × targets). The RESULT shows the item's own
``custom_id`` and the copy's ``target`` (batches.selectors.result_from_row).

Refused, naming the field: a ``targets`` that is not a list of 2 to MAX_TARGETS distinct names each a
known route or enabled provider (``targets[i]``, with a hint); an item naming its own ``route`` or
``provider`` (every item goes to each target; nothing is silently ignored); a non-chat item; a
``custom_id`` too long to carry the suffix; params one of a target's providers refuses; ``steps``
together with ``targets`` (checked by the service).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from batches.evaluation import SEPARATOR, copy_id

from .caps import MAX_CUSTOM_ID_CHARS, MAX_NAME_CHARS, Limits
from .errors import MAX_ERRORS, FieldError, SubmissionError
from .json_values import type_name
from .targets import HINT_SEPARATOR, KnownTargets, close_name
from .validation import ValidItem

FIELD = "targets"
MIN_TARGETS = 2
MAX_TARGETS = 8
CHAT = "chat"
# the longest custom_id a copy can carry: its own, the separator and the longest target name
MAX_ITEM_ID_CHARS = MAX_CUSTOM_ID_CHARS - len(SEPARATOR) - MAX_NAME_CHARS


def targets_query(value: str | None) -> Any:
    """A JSONL body's ``targets`` query parameter: comma-separated names (None: not given)."""
    if value is None or value == "":
        return None
    return [name.strip() for name in value.split(",")]


def check_targets(raw: Any, known: KnownTargets, *, with_steps: bool = False) -> tuple[str, ...]:
    """The batch's targets (() when ``raw`` is None: not an evaluation); raise SubmissionError(400)
    naming ``targets`` or ``targets[i]``. ``with_steps``: the batch has steps too, which is refused
    (comparing pipelines is not built)."""
    if raw is None:
        return ()
    if with_steps:
        message = "cannot go with steps: a batch is either a pipeline or an evaluation"
        raise SubmissionError(400, [FieldError(None, FIELD, message)])
    if not isinstance(raw, list) or not MIN_TARGETS <= len(raw) <= MAX_TARGETS:
        got = f"{len(raw)} names" if isinstance(raw, list) else type_name(raw)
        message = f"must be a list of {MIN_TARGETS} to {MAX_TARGETS} route or provider names, got {got}"
        raise SubmissionError(400, [FieldError(None, FIELD, message)])
    errors: list[FieldError] = []
    seen: dict[str, int] = {}
    for i, name in enumerate(raw):
        problem = _name_problem(name, known)
        if problem is None and name in seen:
            problem = f"duplicate target {name!r}; first given as targets[{seen[name]}]"
        if problem is not None:
            errors.append(FieldError(None, f"{FIELD}[{i}]", problem))
        elif isinstance(name, str):
            seen[name] = i
    if errors:
        raise SubmissionError(400, errors)
    return tuple(raw)


def _name_problem(name: Any, known: KnownTargets) -> str | None:
    if not isinstance(name, str):
        return f"must be a route or provider name (a string), got {type_name(name)}"
    if not name:
        return "must not be empty"
    is_route, enabled = name in known.routes, known.providers.get(name)
    if is_route and enabled is not None:
        return f"{name!r} is both a route and a provider: rename one of them to compare it"
    if is_route or enabled:
        return None
    if enabled is False:
        return f"provider {name!r} is disabled"
    message = f"unknown target {name!r}: neither a route with an enabled rule nor a provider"
    enabled_names = [p for p, on in known.providers.items() if on]
    if guess := close_name(name, [*known.routes, *enabled_names]):
        return f"{message}{HINT_SEPARATOR}did you mean {json.dumps(guess)}?"
    return message


def check_copies(n_items: int, targets: tuple[str, ...], limits: Limits) -> None:
    """A batch with targets holds items × targets copies: at most ``limits.max_items``."""
    copies = n_items * len(targets)
    if copies > limits.max_items:
        message = f"{n_items} items × {len(targets)} targets = {copies} copies; at most {limits.max_items}"
        raise SubmissionError(400, [FieldError(None, "items", message)])


def fan_out(
    items: Sequence[Any], valid: Sequence[ValidItem], targets: tuple[str, ...], known: KnownTargets
) -> list[ValidItem]:
    """One copy of each of ``valid`` (the checked ``items``) per target; raise SubmissionError(400)
    naming each item that cannot go to every target."""
    errors: list[FieldError] = []
    count = 0
    out: list[ValidItem] = []
    for v in valid:
        problems = _problems(items[v.seq], v, targets, known)
        count += len(problems)
        errors.extend(problems[: max(0, MAX_ERRORS - len(errors))])
        if not problems:
            out.extend(_copy(v, i, name, len(targets), known) for i, name in enumerate(targets))
    if count:
        raise SubmissionError(400, errors, count)
    return out


def _problems(raw: Any, v: ValidItem, targets: tuple[str, ...], known: KnownTargets) -> list[FieldError]:
    i = v.seq
    if v.route or v.provider:
        field_name = "route" if v.route else "provider"
        return [
            FieldError(i, field_name, "a batch with targets sends every item to each target: leave it out")
        ]
    if isinstance(raw, dict) and raw.get("endpoint", CHAT) != CHAT:
        return [FieldError(i, "endpoint", "a batch with targets takes chat items only")]
    if len(v.custom_id) > MAX_ITEM_ID_CHARS:
        message = f"is {len(v.custom_id)} characters; at most {MAX_ITEM_ID_CHARS} in a batch with targets"
        return [FieldError(i, "custom_id", message)]
    messages, params = v.payload.get("messages") or [], v.payload.get("params") or {}
    out = []
    for name in targets:  # what each target's providers refuse in the item
        route, provider = _route_of(name, known)
        for field_name, message in known.reach.refusals(route, provider, messages, params):
            out.append(FieldError(i, field_name, f"target {name!r}: {message}"))
    return out


def _route_of(name: str, known: KnownTargets) -> tuple[str, str]:
    return (name, "") if name in known.routes else ("", name)


def _copy(v: ValidItem, index: int, name: str, n: int, known: KnownTargets) -> ValidItem:
    route, provider = _route_of(name, known)
    return dataclasses.replace(
        v,
        seq=v.seq * n + index,
        custom_id=copy_id(v.custom_id, name),
        route=route,
        provider=provider,
        target=name,
    )

"""One interactive request as the engine runs it: its surface's body (interactive/surfaces/: chat,
responses, messages) translated to a chat request, checked with the same rules as a batch item (batches.submission: message shapes, sizes, and the params every provider the
model can reach would refuse, #18), ``model`` resolved to a route (else a provider), the caller's max
wait, and the engine's ``WorkItem`` with its queue deadline. Pure apart from the clock: the routing
data comes in as a value (targets.Targets)."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from batches.submission.caps import Limits
from batches.submission.reach import QUOTA_IMPOSSIBLE_PREFIX
from batches.submission.targets import HINT_SEPARATOR, KnownTargets, close_name
from batches.submission.validation import ItemValidator
from gateway_engine.endpoints import EMBEDDINGS
from gateway_engine.items import WorkItem
from gateway_engine.retry import ErrorType

from .errors import CallError, refusal
from .surfaces.base import Surface
from .surfaces.chat import CHAT

MAX_WAIT_HEADER = "X-Gateway-Max-Wait"
# the engine's deadline is never closer than this: a call that may not wait at all (0) still gets its
# grant's round trips to the shared store (budget, bucket, lease, slot) — served if the quota is there
# now; a bucket that would make it wait longer for a refill ends it at once with the gateway's 429
GRANT_SECONDS = 0.25
_ITEM_PARAM = re.compile(r"^params\.")


@dataclass(frozen=True)
class Call:
    """A checked call: its id, the engine item (its deadline = now + max wait), what it asked for."""

    call_id: str
    item: WorkItem
    model: str
    stream: bool
    include_usage: bool
    max_wait: float
    body: dict[str, Any]
    received: float  # time.monotonic() the request came in
    received_at: float = 0.0  # time.time() the request came in (the attempt log's clock)
    surface: Surface = CHAT  # the shape it came in (and is answered) in
    echo: dict[str, Any] = field(default_factory=dict)  # what the surface's answer repeats of the request

    @property
    def endpoint(self) -> str:
        return self.surface.endpoint


def max_wait(header: str | None, setting: float) -> float:
    """The caller's max wait for quota: the setting, or the header's value if lower (clamped to the
    setting); a non-number or a negative value → 400 naming the header."""
    if header is None or header == "":
        return setting
    try:
        value = float(header)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise CallError(400, f"{MAX_WAIT_HEADER}: must be a number of seconds >= 0, got {header[:40]!r}",
                        param=MAX_WAIT_HEADER, code="invalid_header")  # fmt: skip
    return min(value, setting)


def read_body(raw: bytes, limit: int) -> dict[str, Any]:
    if len(raw) > limit:
        raise CallError(413, f"request body is {len(raw)} bytes; at most {limit}", code="request_too_large")
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CallError(400, "the request body must be a JSON object", code="invalid_json") from None
    if not isinstance(body, dict):
        raise CallError(400, "the request body must be a JSON object", code="invalid_json")
    return body


def prepare(
    body: dict[str, Any],
    *,
    team: str,
    targets: KnownTargets,
    limits: Limits,
    wait: float,
    raw_size: int,
    surface: Surface = CHAT,
) -> Call:
    """The checked call, or the first problem as a CallError naming its param in the surface's terms
    (an unknown model: 404 model_not_found, as OpenAI answers)."""
    received = time.monotonic()
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise CallError(400, "model: required, the name of a route or a provider", param="model",
                        code="missing_required_parameter")  # fmt: skip
    ask = surface.chat_request(body)
    call_id = f"{surface.id_prefix}{uuid.uuid4().hex}"
    item: dict[str, Any] = {"custom_id": call_id, "params": ask.params}
    if surface.endpoint == EMBEDDINGS:
        item.update(endpoint=EMBEDDINGS, input=ask.input)
    else:
        item["messages"] = ask.messages
    if model in targets.routes or model not in targets.providers:
        item["route"] = model  # an unknown model is reported as an unknown route (→ 404)
    else:
        item["provider"] = model
    validator = ItemValidator(limits, targets)
    valid = validator.item(0, item, raw_size)
    if valid is None:
        raise _refusal(validator, model, targets, surface)
    work = WorkItem(
        custom_id=call_id,
        messages=valid.payload.get("messages") or [],
        params=valid.payload["params"],
        route=valid.route,
        provider=valid.provider,
        key=call_id,
        deadline=time.time() + max(wait, GRANT_SECONDS),
        team=team,
        endpoint=surface.endpoint,  # type: ignore[arg-type]  # a surface's endpoint is one of ENDPOINTS
        input=valid.payload.get("input"),
    )
    return Call(call_id, work, model, ask.stream, ask.include_usage, wait, body, received, time.time(),
                surface, ask.echo)  # fmt: skip


def _refusal(validator: ItemValidator, model: str, targets: KnownTargets, surface: Surface) -> CallError:
    error = validator.errors[0]
    where, message = error.field, error.message
    if where in ("route", "provider"):
        if message.startswith("unknown"):
            return CallError(404, _unknown_model(model, targets), param="model", code="model_not_found")
        return CallError(400, f"model: {message}", param="model", code="invalid_value")
    param = surface.param(_ITEM_PARAM.sub("", where)) if where != "item" else None
    if message.startswith(QUOTA_IMPOSSIBLE_PREFIX):  # no reachable provider's buckets can ever hold it
        return refusal(ErrorType.QUOTA_IMPOSSIBLE, message[len(QUOTA_IMPOSSIBLE_PREFIX) :], param=param)
    return CallError(400, f"{param or 'request'}: {message}", param=param, code="invalid_value")


def _unknown_model(model: str, targets: KnownTargets) -> str:
    """The 404 of an unknown model, its hint in the request's own terms: ``model`` names a route or a
    provider (the item's ``"route"`` / ``"provider"`` fields of the native hint do not exist here)."""
    text = f"The model {model!r} does not exist: no route or provider of that name"
    if targets.providers.get(model) is False:
        return f"{text}{HINT_SEPARATOR}{model!r} is a provider, but it is disabled"
    guess = close_name(model, [*targets.routes, *(p for p, on in targets.providers.items() if on)])
    return f"{text}{HINT_SEPARATOR}did you mean model {guess!r}?" if guess else text

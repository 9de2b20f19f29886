"""One ``/v1/embeddings`` request as the engine runs it: OpenAI's request (``model``, ``input`` a string
or a list of strings, ``dimensions``, ``encoding_format``, ``user``) read and checked with the same
rules as a batch embeddings item (batches.submission: the item shape, each reachable provider's kind —
one without embeddings refused naming it —, its params and its per-request input limits), ``model``
resolved to a route (else a provider), the engine's ``WorkItem`` (endpoint ``embeddings``) with its
queue deadline. Pure apart from the clock, as calls.py for chat."""

from __future__ import annotations

import time
import uuid
from typing import Any

from batches.submission.caps import Limits
from batches.submission.targets import KnownTargets
from batches.submission.validation import ItemValidator
from gateway_engine.endpoints import EMBEDDINGS
from gateway_engine.items import WorkItem

from .calls import GRANT_SECONDS, Call
from .calls import _refusal as refusal_of  # the chat lane's wording of a validator's first problem
from .errors import CallError

# OpenAI's embeddings request: what is not the model or the input is an item param
REQUEST_FIELDS = ("model", "input", "dimensions", "encoding_format", "user")
PARAMS = frozenset(REQUEST_FIELDS) - {"model", "input"}


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise CallError(400, "model: required, the name of a route or a provider", param="model",
                        code="missing_required_parameter")  # fmt: skip
    return model


def _fields(body: dict[str, Any]) -> None:
    """OpenAI's own refusals of the request's shape: an unknown argument, no input, a stream."""
    for key in body:
        if key not in REQUEST_FIELDS:
            what = "streaming is not offered for embeddings" if key == "stream" else "unknown parameter"
            raise CallError(400, f"{key}: {what}; /v1/embeddings takes {', '.join(REQUEST_FIELDS)}",
                            param=key, code="unknown_parameter")  # fmt: skip
    if "input" not in body:
        raise CallError(400, "input: required, a string or a list of strings", param="input",
                        code="missing_required_parameter")  # fmt: skip


def prepare(
    body: dict[str, Any], *, team: str, targets: KnownTargets, limits: Limits, wait: float, raw_size: int
) -> Call:
    """The checked call, or the first problem as a CallError naming its param (an unknown model: 404
    model_not_found; a route or provider whose kind serves no embeddings: 400 on ``model``)."""
    received = time.monotonic()
    model = _model(body)
    _fields(body)
    call_id = f"emb-{uuid.uuid4().hex}"
    item: dict[str, Any] = {
        "custom_id": call_id,
        "endpoint": EMBEDDINGS,
        "input": body["input"],
        "params": {k: v for k, v in body.items() if k in PARAMS},
    }
    item["route" if model in targets.routes or model not in targets.providers else "provider"] = model
    validator = ItemValidator(limits, targets)
    valid = validator.item(0, item, raw_size)
    if valid is None:
        raise refusal_of(validator, model, targets)
    work = WorkItem(
        custom_id=call_id,
        messages=[],
        params=valid.payload["params"],
        route=valid.route,
        provider=valid.provider,
        key=call_id,
        deadline=time.time() + max(wait, GRANT_SECONDS),
        team=team,
        endpoint=EMBEDDINGS,
        input=valid.payload["input"],
    )
    return Call(call_id, work, model, False, False, wait, body, received, time.time())

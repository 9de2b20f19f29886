"""Items ⇄ provider-batch lines, and a line's result → the engine's ``ItemResult`` (pure: no ORM, no I/O).

A line's body is exactly what the real-time call of the provider's kind would POST (the kind's wire
format, ``gateway_engine.wire.for_kind(kind).body``; an embeddings item's the kind's embeddings request,
``wire.embeddings.embeddings_for_kind``, where the kind's batch API takes embeddings lines:
``kinds.BatchApi.endpoints``), with ``model`` set where the batch line must name it (Azure: the
Global-Batch deployment; OpenAI: the provider's model). Its custom id is the gateway's own
(``<chunk>-<n>``), never the user's.

A line counts as one attempt of its item (its attempt-log entry says ``served_by: provider_batch``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from gateway_engine.batch_api import BatchLine, LineResult, line_verdict
from gateway_engine.endpoints import CHAT, EMBEDDINGS
from gateway_engine.error_kinds import error_kind
from gateway_engine.items import ItemResult
from gateway_engine.kinds import KINDS
from gateway_engine.retry import ErrorType, is_retryable_error
from gateway_engine.routing import ProviderConfig
from gateway_engine.wire import Answer, for_kind
from gateway_engine.wire.base import AnswerReading
from gateway_engine.wire.embeddings import embeddings_for_kind

SERVED_BY = "provider_batch"


def line_body(config: ProviderConfig, payload: dict[str, Any], endpoint: str = CHAT) -> dict[str, Any]:
    """The JSON body of one item's line for ``config``'s kind (``endpoint``: the item's)."""
    params = payload.get("params") or {}
    if endpoint == EMBEDDINGS:
        body = dict(embeddings_for_kind(config).request(config, payload.get("input") or "", params).body)
    else:
        body = dict(for_kind(config.kind).body(config, list(payload.get("messages") or []), params))
    batch_api = KINDS[config.kind].batch_api
    line_model = batch_api.line_model if batch_api is not None else ""
    if line_model == "deployment":  # Azure: the Global-Batch deployment
        body["model"] = config.batch.deployment if config.batch else config.deployment or config.model
    elif line_model == "model":
        body.setdefault("model", config.model)
    return body


def batch_line(
    line_id: str, config: ProviderConfig, payload: dict[str, Any], endpoint: str = CHAT
) -> BatchLine:
    return BatchLine(custom_id=line_id, body=line_body(config, payload, endpoint), endpoint=endpoint)


def answer_reader(config: ProviderConfig, payload: dict[str, Any], endpoint: str = CHAT) -> AnswerReading:
    """What reads a succeeded line's body: the kind's chat wire format, or the reader of the item's
    embeddings request (it knows how many embeddings the answer must hold)."""
    if endpoint == EMBEDDINGS:
        return (
            embeddings_for_kind(config)
            .request(config, payload.get("input") or "", payload.get("params") or {})
            .reader
        )
    return for_kind(config.kind)


@dataclass(frozen=True)
class LineVerdict:
    """What one line's result means for its item: ``result`` to store (None: send it again in real
    time, ``back_to_realtime``), and the attempt-log entry the line adds either way."""

    result: ItemResult | None
    entry: dict[str, Any]

    @property
    def back_to_realtime(self) -> bool:
        return self.result is None


def _entry(
    provider: str, status_code: int | None, error_type: str, usage: dict[str, int] | None, used: bool
) -> dict[str, Any]:
    return {
        "provider": provider,
        "status_code": status_code,
        "error_type": error_type,
        "latency_ms": 0,
        "prompt_tokens": int((usage or {}).get("prompt_tokens") or 0),
        "completion_tokens": int((usage or {}).get("completion_tokens") or 0),
        "tokens": int((usage or {}).get("total_tokens") or 0),
        "used": used,
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "served_by": SERVED_BY,
    }


def verdict(
    custom_id: str,
    config: ProviderConfig,
    line: LineResult,
    *,
    realtime_allowed: bool,
    latency_ms: int,
    reader: AnswerReading | None = None,
) -> LineVerdict:
    """A line's result → its item's result. Succeeded: the answer read by the kind's wire format.
    Errored non-retryable: the item fails as it would in real time. Errored retryable, expired or
    canceled (by the guard): back to real time when ``realtime_allowed``, else ended (expired /
    cancelled / failed)."""
    wire = reader or for_kind(config.kind)
    if line.outcome == "succeeded" and isinstance(line.body, dict):
        answer = wire.read_answer(line.body)
        if answer.refusal is None:
            return _succeeded(custom_id, config, line, answer, latency_ms)
        error_type, message, status = answer.refusal.error_type, answer.refusal.message, line.status_code
    else:
        error_type, message, status = _line_error(config, line)
    entry = _entry(config.name, status, error_type, None, False)
    retryable = line.outcome in ("expired", "canceled") or is_retryable_error(error_type)
    if retryable and realtime_allowed:
        return LineVerdict(None, entry)
    result = ItemResult(
        custom_id=custom_id,
        status=error_kind(error_type).item_status,
        provider=config.name,
        attempts=1,
        error_type=error_type,
        error_status_code=status,
        error_message=message,
        attempt_log=[entry],  # type: ignore[list-item]
    )
    return LineVerdict(result, entry)


def _succeeded(
    custom_id: str, config: ProviderConfig, line: LineResult, answer: Answer, latency_ms: int
) -> LineVerdict:
    """A succeeded line's answer (no refusal) → a succeeded item and its attempt-log entry."""
    usage = answer.usage or {}
    entry = _entry(config.name, line.status_code or 200, "", usage, True)
    entry["latency_ms"] = latency_ms
    result = ItemResult(
        custom_id=custom_id,
        status="succeeded",
        provider=config.name,
        attempts=1,
        latency_ms=latency_ms,
        response=answer.response,
        native_response=answer.native,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        total_tokens=usage.get("total_tokens"),
        cached_tokens=usage.get("cached_tokens"),
        cache_write_tokens=usage.get("cache_write_tokens"),
        attempt_log=[entry],  # type: ignore[list-item]
    )
    return LineVerdict(result, entry)


def _line_error(config: ProviderConfig, line: LineResult) -> tuple[str, str, int | None]:
    """(error type, message, status code) of a line that did not succeed: errored (judged by the kind),
    expired, or cancelled."""
    if line.outcome == "errored":
        status = line.status_code
        judged = line_verdict(config.kind, line, config.api_key)
        error_type = judged.error_type if judged else ErrorType.SERVER_ERROR
        message = judged.message if judged else "the provider batch errored this line"
        return error_type, message, status
    if line.outcome == "expired":
        return ErrorType.EXPIRED, "the provider batch expired before this line ran", None
    return ErrorType.CANCELLED, "the provider batch was cancelled before this line ran", None


def missing_line(
    custom_id: str, config: ProviderConfig, *, realtime_allowed: bool, cancelled: bool
) -> LineVerdict:
    """A line the provider returned nothing for (a failed or cancelled batch)."""
    outcome = "canceled" if cancelled else "expired"
    return verdict(
        custom_id,
        config,
        LineResult(custom_id, outcome, None, None, None),
        realtime_allowed=realtime_allowed,
        latency_ms=0,
    )  # type: ignore[arg-type]

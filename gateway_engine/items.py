"""The engine's value types: a work item in, its result out, one attempt's log entry, the TPM estimate.

This module imports nothing else of the engine but ``result`` (the RESULT dict builder, itself import-free),
so every other module (protocols, observer, journal, the batcher) can import from here without a circle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypeAlias, TypedDict

from .result import result_dict

__all__ = ["AttemptEntry", "ItemResult", "RawItem", "WorkItem", "estimate_tokens"]


@dataclass
class WorkItem:
    custom_id: str
    messages: list[Any]  # chat messages (JSON)
    params: dict[str, Any] = field(default_factory=dict)
    route: str = ""
    provider: str = ""
    key: str = ""  # stable identity for the weighted route draw and the X-Request-ID header
    deadline: float | None = None  # epoch seconds; not sent by then → expired
    batch_id: str = ""  # salt of the weighted route draw (else the batcher's salt); per-batch cancel
    team: str = ""  # the submitting team's name: its budgets and share cap apply (empty: none)

    @classmethod
    def coerce(cls, item: object, index: int = 0) -> WorkItem:
        """From a WorkItem or a contract ITEM dict ({custom_id, route|provider, messages|query, params})."""
        if isinstance(item, WorkItem):
            return item
        if not isinstance(item, Mapping):
            raise ValueError(f"items[{index}]: must be a dict or WorkItem, got {type(item).__name__}")
        where = f"items[{index}]"
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            raise ValueError(f"{where}.custom_id: must be a non-empty string")
        route, provider = item.get("route") or "", item.get("provider") or ""
        if bool(route) == bool(provider):
            raise ValueError(f"{where}: exactly one of route/provider is required")
        messages, query = item.get("messages"), item.get("query")
        if (messages is None) == (query is None):
            raise ValueError(f"{where}: exactly one of messages/query is required")
        if query is not None:
            if not isinstance(query, str):
                raise ValueError(f"{where}.query: must be a string")
            messages = [{"role": "user", "content": query}]
        if not isinstance(messages, list) or not messages:
            raise ValueError(f"{where}.messages: must be a non-empty list")
        params = item.get("params") or {}
        if not isinstance(params, Mapping):
            raise ValueError(f"{where}.params: must be an object")
        return cls(custom_id, messages, dict(params), str(route), str(provider), str(item.get("key") or ""))


class AttemptEntry(TypedDict):
    """One HTTP attempt in ``ItemResult.attempt_log`` (stored with the item; read by gateway_engine.stats)."""

    provider: str
    status_code: int | None
    error_type: str
    latency_ms: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int  # total tokens the provider reported (billed even when the answer was not used)
    used: bool  # this attempt's answer became the item's result
    at: str  # ISO time the attempt was sent
    detail: NotRequired[str]  # staff only: the provider's (cleaned, capped) error body


@dataclass
class ItemResult:
    custom_id: str
    status: str  # succeeded | failed | cancelled | expired | released (not sent; the caller re-queues it)
    provider: str = ""
    attempts: int = 0
    latency_ms: int | None = None
    response: Any = None
    error_type: str = ""
    error_status_code: int | None = None
    error_message: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    retry_extra_tokens: int = 0
    attempt_log: list[AttemptEntry] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def as_result(self) -> dict[str, Any]:
        """The contract's RESULT object (gateway_engine.result, as the stored item reads back)."""
        return result_dict(
            self.custom_id,
            self.status,
            provider=self.provider,
            attempts=self.attempts,
            latency_ms=self.latency_ms,
            response=self.response,
            error_type=self.error_type,
            error_status_code=self.error_status_code,
            error_message=self.error_message,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            total_tokens=self.total_tokens,
        )


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def estimate_tokens(messages: list[Any], params: Mapping[str, Any], default_max_tokens: int) -> int:
    """TPM reservation: prompt characters / 4 + the completion budget × ``n`` choices. The budget is the
    larger of ``max_tokens`` and ``max_completion_tokens`` (a provider honours either), else the
    default; ``n`` (choices per request, each billed) multiplies it, so a request cannot reserve a
    fraction of what it will be billed."""
    chars = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else message
        chars += len(content) if isinstance(content, str) else len(json.dumps(content, default=str))
    budgets = [
        b for b in (_positive_int(params.get(k)) for k in ("max_tokens", "max_completion_tokens")) if b
    ]
    budget = max(budgets) if budgets else default_max_tokens
    choices = _positive_int(params.get("n")) or 1
    return int(math.ceil(chars / 4)) + max(0, budget) * choices


# one work item as a caller hands it over: a WorkItem or a contract ITEM dict (WorkItem.coerce checks it)
RawItem: TypeAlias = "WorkItem | Mapping[str, Any]"

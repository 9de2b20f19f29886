"""The engine's value types: a work item in, its result out, one attempt's log entry, the TPM estimate.

This module imports nothing else of the engine but ``result`` (the RESULT dict builder) and ``item_shape``
(the ITEM shape rule), both import-free,
so every other module (protocols, observer, journal, the batcher) can import from here without a circle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypeAlias, TypedDict, cast

from .endpoints import CHAT, EMBEDDINGS, Endpoint
from .item_shape import LENIENT, Problem, check_item_shape, token_array
from .result import result_dict

__all__ = [
    "AttemptEntry",
    "EmbeddingInput",
    "ItemResult",
    "RawItem",
    "RetryState",
    "WorkItem",
    "estimate_split",
    "estimate_tokens",
    "embedding_inputs",
    "input_tokens",
    "one_input_tokens",
    "item_estimate",
    "text_tokens",
]


# an embeddings item's input: a text, a list of texts, one token array or a list of token arrays
EmbeddingInput: TypeAlias = "str | list[str] | list[int] | list[list[int]]"


@dataclass(frozen=True)
class RetryState:
    """What an item's earlier claims spent, carried to its next claim when it was given back while it
    waited out a breaker or a backoff (docs/engine.md "Failure isolation"): its attempts per provider
    (``max_retries`` counts them) and the seconds it already waited for open breakers
    (``max_breaker_wait_seconds`` counts them)."""

    tried: Mapping[str, int] = field(default_factory=dict)
    breaker_waited: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"tried": dict(self.tried), "breaker_waited": round(self.breaker_waited, 3)}

    @classmethod
    def from_dict(cls, raw: object) -> RetryState | None:
        """From ``as_dict``'s shape (stored with the item); None for an empty or foreign value."""
        if not isinstance(raw, Mapping) or not raw:
            return None
        tried = raw.get("tried")
        if not isinstance(tried, Mapping):
            tried = {}
        waited = raw.get("breaker_waited")
        return cls(
            {str(k): int(v) for k, v in tried.items() if isinstance(v, int) and v > 0},
            float(waited) if isinstance(waited, int | float) and math.isfinite(waited) else 0.0,
        )


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
    carried: RetryState | None = None  # what earlier claims of this item spent (None: nothing)
    # the surface it came in on (gateway_engine.endpoints): "embeddings" items carry ``input`` (a string
    # or a list of strings) and no messages; the others are chat requests on the wire
    endpoint: Endpoint = CHAT
    input: EmbeddingInput | None = None
    # a provider of the route's first priority tier tried first instead of the weighted draw's pick: the
    # peer that claimed the item from a held-back provider (a capacity move; "" = the draw decides)
    prefer: str = ""

    @classmethod
    def coerce(cls, item: object, index: int = 0) -> WorkItem:
        """From a WorkItem or a contract ITEM dict ({custom_id, route|provider, messages|query, params},
        or an embeddings item {…, "endpoint": "embeddings", input}), checked by the one item-shape rule
        (gateway_engine.item_shape, read leniently)."""
        if isinstance(item, WorkItem):
            return item
        where = f"items[{index}]"
        shape = check_item_shape(item, LENIENT)
        if not shape.ok:
            raise ValueError(_shape_message(shape.problems[0].problem, where, item))
        assert isinstance(item, Mapping)  # the shape check passed: item is a Mapping
        messages: list[Any] = []
        if shape.content == "query":
            messages = [{"role": "user", "content": item["query"]}]
        elif shape.content == "messages":
            messages = item["messages"]
        route, provider = item.get("route") or "", item.get("provider") or ""
        params = item.get("params") or {}
        work = cls(
            item["custom_id"], messages, dict(params), str(route), str(provider), str(item.get("key") or "")
        )
        if shape.content == "input":
            work.endpoint, work.input = EMBEDDINGS, item["input"]
        return work


# How WorkItem.coerce words each item-shape problem (after the item's path, e.g. "items[3]").
_SHAPE_MESSAGES = {
    Problem.CUSTOM_ID_MISSING: ".custom_id: must be a non-empty string",
    Problem.CUSTOM_ID_NOT_A_STRING: ".custom_id: must be a non-empty string",
    Problem.CUSTOM_ID_EMPTY: ".custom_id: must be a non-empty string",
    Problem.TARGET_BOTH: ": exactly one of route/provider is required",
    Problem.TARGET_NEITHER: ": exactly one of route/provider is required",
    Problem.CONTENT_BOTH: ": exactly one of messages/query is required",
    Problem.CONTENT_NEITHER: ": exactly one of messages/query is required",
    Problem.QUERY_NOT_A_STRING: ".query: must be a string",
    Problem.MESSAGES_NOT_A_LIST: ".messages: must be a non-empty list",
    Problem.MESSAGES_EMPTY: ".messages: must be a non-empty list",
    Problem.PARAMS_NOT_AN_OBJECT: ".params: must be an object",
    Problem.ENDPOINT_UNKNOWN: ".endpoint: must be 'chat' or 'embeddings'",
    Problem.INPUT_MISSING: ".input: required for an embeddings item",
    Problem.INPUT_NOT_FOR_CHAT: '.input: only for embeddings items ("endpoint": "embeddings")',
    Problem.CONTENT_NOT_FOR_EMBEDDINGS: ": an embeddings item takes input, not messages/query",
    Problem.INPUT_NOT_TEXT: ".input: must be a string or a list of strings",
    Problem.INPUT_EMPTY: ".input: must not be empty",
    Problem.INPUT_ELEMENT_NOT_TEXT: ".input: every element must be a non-empty string (or every one a token array)",
}


def _shape_message(problem: Problem, where: str, item: object) -> str:
    if problem is Problem.NOT_AN_OBJECT:
        return f"{where}: must be a dict or WorkItem, got {type(item).__name__}"
    return where + _SHAPE_MESSAGES[problem]


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
    cached_tokens: NotRequired[int]  # input read from the prompt cache (in prompt_tokens), when reported
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
    # the provider's own answer when ``response`` is its OpenAI translation (kinds other than openai)
    native_response: Any = None
    cached_tokens: int | None = None  # input read from the provider's prompt cache (in prompt_tokens)
    cache_write_tokens: int | None = None  # input written to the prompt cache (in prompt_tokens)
    # what served it: "realtime" (the engine), "provider_batch", "cache" (set by batches.execution.apply)
    served_by: str = "realtime"
    # a result released after attempts (it waited out a breaker or a backoff when its run drained): what
    # it spent, for its next claim (WorkItem.carried); None otherwise
    retry_state: RetryState | None = None

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
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            served_by=self.served_by,
        )


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def text_tokens(text: str) -> int:
    """The estimate of one text's tokens: characters / 4, rounded up (at least 1 for a non-empty text)."""
    return int(math.ceil(len(text) / 4))


def embedding_inputs(embedding_input: EmbeddingInput) -> list[str | list[int]]:
    """One entry per input the request embeds: a text, or a token array (one token array is one input)."""
    if isinstance(embedding_input, str) or token_array(embedding_input):
        return [cast("str | list[int]", embedding_input)]
    return list(cast("list[str | list[int]]", embedding_input))


def one_input_tokens(one: str | list[int]) -> int:
    """One input's estimate: a text's ``text_tokens``, a token array's length (exact)."""
    return text_tokens(one) if isinstance(one, str) else len(one)


def input_tokens(embedding_input: EmbeddingInput) -> int:
    """An embeddings input's estimate: every input of a list counts (``one_input_tokens`` each)."""
    return sum(one_input_tokens(one) for one in embedding_inputs(embedding_input))


def estimate_split(
    messages: list[Any],
    params: Mapping[str, Any],
    default_max_tokens: int,
    *,
    embedding_input: EmbeddingInput | None = None,
) -> tuple[int, int]:
    """The reservation split as (input, output): input = prompt characters / 4; output = the completion
    budget × ``n`` choices. The budget is the larger of ``max_tokens`` and ``max_completion_tokens`` (a
    provider honours either), else the default (what a kind that requires ``max_tokens`` is sent);
    ``n`` (choices per request, each billed) multiplies it, so a request cannot reserve a fraction of
    what it will be billed. Providers with ITPM / OTPM limits count the two apart (docs/quota.md).
    An embeddings item (``embedding_input`` given) reserves its input only (``input_tokens``: every
    element of a list) and no output: an embedding has no completion."""
    if embedding_input is not None:
        return input_tokens(embedding_input), 0
    chars = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else message
        chars += len(content) if isinstance(content, str) else len(json.dumps(content, default=str))
    budgets = [
        b for b in (_positive_int(params.get(k)) for k in ("max_tokens", "max_completion_tokens")) if b
    ]
    budget = max(budgets) if budgets else default_max_tokens
    choices = _positive_int(params.get("n")) or 1
    return int(math.ceil(chars / 4)), max(0, budget) * choices


def estimate_tokens(
    messages: list[Any],
    params: Mapping[str, Any],
    default_max_tokens: int,
    *,
    embedding_input: EmbeddingInput | None = None,
) -> int:
    """TPM reservation: the input and output estimates of ``estimate_split`` together."""
    est_input, est_output = estimate_split(
        messages, params, default_max_tokens, embedding_input=embedding_input
    )
    return est_input + est_output


def item_estimate(item: WorkItem, default_max_tokens: int) -> tuple[int, int]:
    """``estimate_split`` of one work item (an embeddings item: its input, no output)."""
    embedding_input = item.input if item.endpoint == EMBEDDINGS else None
    return estimate_split(item.messages, item.params, default_max_tokens, embedding_input=embedding_input)


# one work item as a caller hands it over: a WorkItem or a contract ITEM dict (WorkItem.coerce checks it)
RawItem: TypeAlias = "WorkItem | Mapping[str, Any]"

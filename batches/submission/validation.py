"""Pure validation of a batch's items: the one item-shape rule (gateway_engine.item_shape, read
strictly) plus submission's own limits, against the known routes and providers passed in.

Nothing here reads the database or settings: ``check_items(items, targets, limits)`` needs only its
arguments, so it is unit-tested without one (tests/submission/test_validation.py). Every item is
checked; the first MAX_ERRORS problems are listed and ``error_count`` gives the total.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from gateway_engine.item_shape import (
    CHAT_ENDPOINT,
    EMBEDDINGS_ENDPOINT,
    STRICT,
    ItemShape,
    Problem,
    check_item_shape,
)
from gateway_engine.items import EmbeddingInput
from gateway_engine.wire.embeddings_check import EMBEDDINGS_RESERVED
from gateway_engine.wire.openai import RESERVED_PARAMS

from .caps import MAX_CUSTOM_ID_CHARS, MAX_NAME_CHARS, MAX_PARAMS_DEPTH, Limits
from .errors import MAX_ERRORS, FieldError, SubmissionError
from .json_values import ENCODER, contains_nul, depth, is_encodable, parse_problem, type_name
from .messages import Report, check_messages, query_messages
from .parsing import check_count
from .targets import KnownTargets, unknown_provider, unknown_route

# GC is paused only while validating one slice of this many items, never for the whole request.
GC_SLICE_ITEMS = 5000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
ITEM_FIELDS = frozenset(
    {"custom_id", "route", "provider", "endpoint", "messages", "query", "input", "params"}
)

# How submission words each item-shape problem: the item's value for the field is shown as {got}.
SHAPE_MESSAGES = {
    Problem.CUSTOM_ID_MISSING: "required: a string unique in the batch",
    Problem.CUSTOM_ID_NOT_A_STRING: "must be a string, got {got}",
    Problem.CUSTOM_ID_EMPTY: "must not be empty",
    Problem.TARGET_BOTH: "give exactly one of 'route' or 'provider', not both",
    Problem.TARGET_NEITHER: "one of 'route' or 'provider' is required",
    Problem.CONTENT_BOTH: "give exactly one of 'messages' or 'query', not both",
    Problem.CONTENT_NEITHER: "one of 'messages' or 'query' is required",
    Problem.QUERY_NOT_A_STRING: "must be a string, got {got}",
    Problem.MESSAGES_NOT_A_LIST: "must be a list of {{role, content}} objects, got {got}",
    Problem.MESSAGES_EMPTY: "must contain at least one message",
    Problem.PARAMS_NOT_AN_OBJECT: "must be an object, got {got}",
    Problem.ENDPOINT_UNKNOWN: "must be 'chat' or 'embeddings', got {got}",
    Problem.INPUT_MISSING: "required for an embeddings item: a string or a list of strings",
    Problem.INPUT_NOT_FOR_CHAT: 'only for embeddings items: add "endpoint": "embeddings", or use messages/query',
    Problem.CONTENT_NOT_FOR_EMBEDDINGS: "not for an embeddings item: give its text as 'input'",
    Problem.INPUT_NOT_TEXT: "must be a string or a list of strings, got {got}",
    Problem.INPUT_EMPTY: "must not be empty",
    Problem.INPUT_ELEMENT_NOT_TEXT: "every element must be a non-empty string (or every one a token array)",
}


@dataclass(frozen=True)
class ValidItem:
    seq: int
    custom_id: str
    route: str
    provider: str
    payload: dict[str, Any]
    payload_json: str
    endpoint: str = CHAT_ENDPOINT  # "chat" or "embeddings" (gateway_engine.endpoints): BatchItem.endpoint
    pipeline: dict[str, Any] | None = None  # a batch with steps: the item's record (batches.steps)
    target: str = ""  # a batch with targets: the copy's target (batches.submission.fanout)


class ItemValidator:
    """Checks items one by one (``item``), collecting problems; duplicates of custom_id are found
    across the items it has seen."""

    def __init__(self, limits: Limits, targets: KnownTargets, target_optional: bool = False):
        self.limits = limits
        self.targets = targets
        self.target_optional = target_optional  # a batch with steps: the steps may name the targets
        self.seen: dict[str, int] = {}
        self.errors: list[FieldError] = []
        self.error_count = 0
        self.hints: dict[tuple[str, str], str] = {}

    def err(self, index: int, field_name: str, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(FieldError(index, field_name, message))

    def item(self, i: int, item: Any, raw_size: int | None) -> ValidItem | None:
        shape = check_item_shape(item, STRICT)
        if shape.problem("") is Problem.NOT_AN_OBJECT:
            self.err(i, "item", f"must be an object, got {type_name(item)}")
            return None
        before = self.error_count
        if not ITEM_FIELDS.issuperset(item):
            for key in item:
                if key not in ITEM_FIELDS:
                    self.err(i, str(key)[:100], f"unknown field; allowed: {', '.join(sorted(ITEM_FIELDS))}")
        custom_id = self._custom_id(i, item, shape)
        route, provider = self._target(i, item, shape)
        embeddings = shape.endpoint == EMBEDDINGS_ENDPOINT
        self._shape_error(i, item, shape, "endpoint")
        messages, text = (
            ([], self._input(i, item, shape)) if embeddings else (self._messages(i, item, shape), None)
        )
        params = self._params(i, item, shape, embeddings=embeddings)
        if self.error_count == before:  # a well-formed item: what its reachable providers refuse
            refused = self.targets.reach.refusals(route, provider, messages, params, embedding_input=text)
            for field_name, message in refused:
                self.err(i, field_name, message)
        if self.error_count != before:
            return None
        if embeddings:
            payload: dict[str, Any] = {"input": text, "params": params}
            return self._stored(i, custom_id, route, provider, payload, raw_size, EMBEDDINGS_ENDPOINT)
        return self._stored(i, custom_id, route, provider, {"messages": messages, "params": params}, raw_size)

    def _shape_error(self, i: int, item: dict[str, Any], shape: ItemShape, field_name: str) -> bool:
        """Report the item-shape problem of ``field_name``, if any; True when there was one."""
        problem = shape.problem(field_name)
        if problem is None:
            return False
        self.err(i, field_name, SHAPE_MESSAGES[problem].format(got=type_name(item.get(field_name))))
        return True

    def _stored(
        self,
        i: int,
        custom_id: str,
        route: str,
        provider: str,
        payload: dict[str, Any],
        raw_size: int | None,
        endpoint: str = CHAT_ENDPOINT,
    ) -> ValidItem | None:
        """The item as stored, or None after a problem with its JSON form (encoding, NUL, size)."""
        try:
            payload_json = ENCODER.encode(payload)
        except (ValueError, RecursionError) as exc:  # NaN/Infinity from Python callers, absurd nesting
            self.err(i, "item", f"cannot be stored as JSON: {parse_problem(exc)}")
            return None
        if payload_json.isascii():
            encoded_size = len(payload_json)
        else:
            try:
                encoded_size = len(payload_json.encode("utf-8"))
            except UnicodeEncodeError:
                self.err(i, "item", "contains invalid Unicode (a lone surrogate escape such as \\ud800)")
                return None
        if "\\u0000" in payload_json and contains_nul(payload):
            # PostgreSQL text and jsonb cannot hold NUL characters.
            self.err(i, "item", "must not contain NUL (\\u0000) characters")
            return None
        size = raw_size if raw_size is not None else encoded_size + len(custom_id)
        if size > self.limits.max_item_bytes:
            self.err(i, "item", f"item is {size} bytes; at most {self.limits.max_item_bytes} bytes per item")
            return None
        return ValidItem(i, custom_id, route, provider, payload, payload_json, endpoint)

    def _custom_id(self, i: int, item: dict[str, Any], shape: ItemShape) -> str:
        if self._shape_error(i, item, shape, "custom_id"):
            return ""
        value: str = item["custom_id"]
        if not value.strip():
            self.err(i, "custom_id", "must not be empty")
        elif len(value) > MAX_CUSTOM_ID_CHARS:
            self.err(i, "custom_id", f"is {len(value)} characters; at most {MAX_CUSTOM_ID_CHARS}")
        elif _CONTROL.search(value) or not is_encodable(value):
            self.err(
                i, "custom_id", "must not contain control characters (NUL, tab, newline …) or invalid Unicode"
            )
        elif value in self.seen:
            self.err(i, "custom_id", f"duplicate custom_id {value!r}; first used by item {self.seen[value]}")
        else:
            self.seen[value] = i
        return value

    def _name(self, i: int, item: dict[str, Any], key: str) -> str | None:
        value = item[key]
        if not isinstance(value, str):
            self.err(i, key, f"must be a string, got {type_name(value)}")
            return None
        if not value:
            self.err(i, key, "must not be empty")
            return None
        if len(value) > MAX_NAME_CHARS:
            self.err(i, key, f"is {len(value)} characters; at most {MAX_NAME_CHARS}")
            return None
        return value

    def _target(self, i: int, item: dict[str, Any], shape: ItemShape) -> tuple[str, str]:
        if self.target_optional and shape.problem("route") is Problem.TARGET_NEITHER:
            return "", ""  # batches.submission.pipeline_items checks the steps that need it
        if self._shape_error(i, item, shape, "route"):
            return "", ""
        if shape.target == "route":
            route = self._name(i, item, "route")
            if route is not None and route not in self.targets.routes:
                self.err(i, "route", self._hinted("route", route))
            return route or "", ""
        provider = self._name(i, item, "provider")
        if provider is not None:
            enabled = self.targets.providers.get(provider)
            if enabled is None:
                self.err(i, "provider", self._hinted("provider", provider))
            elif not enabled:
                self.err(i, "provider", f"provider {provider!r} is disabled")
        return "", provider or ""

    def _hinted(self, kind: str, name: str) -> str:
        """'unknown route/provider' with what was probably meant; the hint is worked out only for errors
        that are listed (the first MAX_ERRORS) and once per name."""
        if len(self.errors) >= MAX_ERRORS:
            return f"unknown {kind} {name!r}"
        key = (kind, name)
        if key not in self.hints:
            unknown = unknown_route if kind == "route" else unknown_provider
            self.hints[key] = unknown(name, self.targets)
        return self.hints[key]

    def _messages(self, i: int, item: dict[str, Any], shape: ItemShape) -> list[Any]:
        if any(self._shape_error(i, item, shape, name) for name in ("messages", "query", "input")):
            return []
        if shape.content not in ("messages", "query"):  # the endpoint or input had the problem
            return []
        report: Report = partial(self.err, i)
        if shape.content == "query":
            return query_messages(item["query"], self.limits.max_item_bytes, report)
        return check_messages(item["messages"], report)

    def _input(self, i: int, item: dict[str, Any], shape: ItemShape) -> EmbeddingInput | None:
        """An embeddings item's input (None after a shape problem: the problem is reported)."""
        for field_name in ("messages", "query", "input"):
            if self._shape_error(i, item, shape, field_name):
                return None
        text: EmbeddingInput = item["input"]
        return text

    def _params(
        self, i: int, item: dict[str, Any], shape: ItemShape, *, embeddings: bool = False
    ) -> dict[str, Any]:
        if "params" not in item or self._shape_error(i, item, shape, "params"):
            return {}
        params: dict[str, Any] = item["params"]
        for key in params:
            if key in (EMBEDDINGS_RESERVED if embeddings else RESERVED_PARAMS):
                self.err(i, f"params.{key}", "is set by the gateway; remove it")
        if depth(params, MAX_PARAMS_DEPTH) > MAX_PARAMS_DEPTH:
            self.err(i, "params", f"nested deeper than {MAX_PARAMS_DEPTH} levels")
        if embeddings:
            return params
        if "max_tokens" in params:
            value = params["max_tokens"]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                self.err(i, "params.max_tokens", "must be a positive integer")
        return params


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while validating one slice (GC_SLICE_ITEMS) of items.

    The objects made here hold no reference cycles; without this the collector re-scans the growing
    heap again and again. It is re-enabled between slices, so it never stays off for a whole request.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def check_items(
    items: Sequence[Any],
    targets: KnownTargets,
    limits: Limits,
    item_sizes: Sequence[int] | None = None,
    item_lines: Sequence[int] | None = None,
    target_optional: bool = False,
) -> list[ValidItem]:
    """Validate every item; raise SubmissionError(400) listing the first 100 problems, or return all.
    With ``item_lines`` (a JSONL body's line per item) each error names its line too;
    ``target_optional`` (a batch with steps) lets an item name neither route nor provider."""
    check_count(len(items), limits)
    validator = ItemValidator(limits, targets, target_optional)
    valid: list[ValidItem] = []
    for start in range(0, len(items), GC_SLICE_ITEMS):
        with paused_gc():  # per slice only: the collector runs between slices
            for i in range(start, min(start + GC_SLICE_ITEMS, len(items))):
                result = validator.item(i, items[i], item_sizes[i] if item_sizes is not None else None)
                if result is not None:
                    valid.append(result)
    if validator.error_count:
        errors = validator.errors
        if item_lines is not None:
            errors = [_on_line(e, item_lines) for e in errors]
        raise SubmissionError(400, errors, validator.error_count)
    return valid


def _on_line(error: FieldError, item_lines: Sequence[int]) -> FieldError:
    if error.index is None or not 0 <= error.index < len(item_lines):
        return error
    line = item_lines[error.index]
    return FieldError(error.index, error.field, f"line {line}: {error.message}", line)

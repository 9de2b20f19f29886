"""Batch submission: parse a JSON or JSONL body, validate every item, store the batch in one transaction.

Validation is hand-written (not DRF serializers): it runs once per item for batches of up to
GATEWAY_MAX_ITEMS_PER_BATCH items, and a DRF serializer costs ~3x more per item while checking
less (measured by bench/ingest.py, see docs/benchmarks.md). Every item is checked before anything
is stored; on any error a SubmissionError carries the HTTP status and a list of field-level
errors, and no row is written.

Items are stored with PostgreSQL COPY (psycopg 3) or, on other databases, bulk_create in large
chunks. After the transaction commits, `batches.tasks.start_batch` is queued for the new batch.
"""

from __future__ import annotations

import contextvars
import difflib
import gc
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone

from gateway_engine.http import RESERVED_PARAMS
from gateway_engine.routing import RoutingError, candidates, stable_draw
from providers.models import Provider
from providers.selectors import known_route_names
from teams.models import ApiKey, Team

from . import queue_limits
from .models import Batch, BatchItem, BatchPriority, BatchStatus, ItemStatus

MAX_ERRORS = 100  # errors listed in one response; `error_count` gives the total
MAX_CUSTOM_ID_CHARS = 255
MAX_NAME_CHARS = 64  # route / provider names (the model fields' max_length)
MAX_METADATA_BYTES = 16 * 1024
# Metadata keys the gateway writes itself (batches.retry's "retry_of", anything "gateway_…"): a client may
# not set them (400 naming the key, nothing stored), so what the gateway reads back there is its own.
RESERVED_METADATA_KEYS = frozenset({"retry_of"})
RESERVED_METADATA_PREFIX = "gateway_"
# A UTF-8 byte order mark (Excel, Notepad) before a JSON or JSONL body is not part of it.
UTF8_BOM = b"\xef\xbb\xbf"
# Between an error and its hint ("did you mean …", "… is a provider"); /v1 rewrites hints after it.
HINT_SEPARATOR = " — "
# Resource limits checked on the raw bytes before parsing (a body of nested "[]" is ~30x its size in
# Python objects): JSON containers ({ or [ outside strings) per body, and per item as validated.
MAX_CONTAINERS_PER_BODY = 1_000_000
MAX_BYTES_PER_CONTAINER = 8  # a body must average at least this many bytes per container
MAX_MESSAGES = 1000
MAX_CONTENT_PARTS = 100
MAX_PARAMS_DEPTH = 8
# GC is paused only while validating one slice of this many items, never for the whole request.
GC_SLICE_ITEMS = 5000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
ROLES = frozenset({"system", "user", "assistant", "tool"})
ITEM_FIELDS = frozenset({"custom_id", "route", "provider", "messages", "query", "params"})
BODY_FIELDS = frozenset({"items", "metadata", "priority", "completion_window"})
# Batch options: top-level JSON fields, or query parameters for a JSONL body (docs/contract.md §4).
PRIORITIES = tuple(p.value for p in BatchPriority)
COMPLETION_WINDOW_RE = re.compile(r"^[1-9][0-9]*(s|m|h|d)$")
WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_COMPLETION_WINDOW = timedelta(seconds=10)
MAX_COMPLETION_WINDOW = timedelta(days=7)

JSON_MEDIA_TYPES = frozenset({"application/json"})
JSONL_MEDIA_TYPES = frozenset({"application/jsonl", "application/x-ndjson", "application/jsonlines"})

COPY_COLUMNS = (
    "batch_id",
    "seq",
    "custom_id",
    "route",
    "requested_provider",
    "queue_provider",
    "payload",
    "status",
    "provider",
    "attempts",
    "error_type",
    "error_message",
    "retry_extra_tokens",
    "attempt_log",
    "claimed_by",
    "created_at",
)
SQLITE_CHUNK = 5000


@dataclass(frozen=True)
class FieldError:
    """One problem: `index` is the item's 0-based position (None for body-level problems); `line` is the
    1-based line of a JSONL body the item came from (it differs from index + 1 after blank lines)."""

    index: int | None
    field: str
    message: str
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "field": _safe(self.field),
            "message": _safe(self.message),
        }
        if self.line is not None:
            out["line"] = self.line
        return out


def _safe(text: str) -> str:
    """Text that always encodes as UTF-8 (callers can send lone surrogates in keys and values)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class SubmissionError(Exception):
    """Invalid submission. `status_code` is the HTTP status to answer (400, 413 or 415)."""

    def __init__(self, status_code: int, errors: list[FieldError], error_count: int | None = None):
        self.status_code = status_code
        self.errors = errors[:MAX_ERRORS]
        self.error_count = len(errors) if error_count is None else error_count
        super().__init__("; ".join(f"{e.index}.{e.field}: {e.message}" for e in self.errors[:5]))

    def as_dict(self) -> dict[str, Any]:
        return {"errors": [e.as_dict() for e in self.errors], "error_count": self.error_count}


class BudgetRefused(SubmissionError):
    """429: the batch's estimated tokens exceed what is left of the team's daily or monthly budget."""

    def __init__(self, exceeded):
        self.exceeded = exceeded
        super().__init__(429, [FieldError(None, "budget", str(exceeded))])

    def as_dict(self) -> dict[str, Any]:
        e = self.exceeded
        budget = {"period": e.period, "limit": e.limit, "used": e.used, "remaining": e.remaining}
        return {**super().as_dict(), "budget": budget}


class QueueLimitRefused(SubmissionError):
    """429: the team is at one of its queued-work limits (batches.queue_limits); nothing is stored."""

    def __init__(self, limit: str, message: str, retry_after: int):
        self.limit, self.message, self.retry_after = limit, message, int(retry_after)
        super().__init__(429, [FieldError(None, f"limits.{limit}", message)])

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "limit": self.limit, "retry_after": self.retry_after}

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


@dataclass
class ParsedBody:
    items: list[Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    priority: Any = None
    completion_window: Any = None
    # Raw size in bytes of each item as sent (JSONL lines); None when the body was one JSON document.
    item_sizes: list[int] | None = None
    # 1-based line of each item in a JSONL body (blank lines are skipped); None for a JSON document.
    item_lines: list[int] | None = None


@dataclass(frozen=True)
class Limits:
    max_items: int
    max_body_bytes: int
    max_item_bytes: int

    @classmethod
    def from_settings(cls) -> Limits:
        # Read at call time so override_settings (and operators' env) apply without a reload.
        return cls(
            max_items=settings.GATEWAY_MAX_ITEMS_PER_BATCH,
            max_body_bytes=settings.GATEWAY_MAX_BODY_BYTES,
            max_item_bytes=settings.GATEWAY_MAX_ITEM_BYTES,
        )


def _body_error(status: int, field_name: str, message: str) -> SubmissionError:
    return SubmissionError(status, [FieldError(None, field_name, message)])


# --- parsing --------------------------------------------------------------------------------------


def media_type_of(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_body_size(length: int, limits: Limits | None = None) -> None:
    limits = limits or Limits.from_settings()
    if length > limits.max_body_bytes:
        raise _body_error(
            413, "body", f"request body is {length} bytes; the limit is {limits.max_body_bytes} bytes"
        )


def parse_body(body: bytes, content_type: str | None, limits: Limits | None = None) -> ParsedBody:
    """Parse a JSON (`{"items": [...], "metadata": {...}}`) or JSONL (one item per line) body."""
    limits = limits or Limits.from_settings()
    check_body_size(len(body), limits)
    media = media_type_of(content_type)
    if media in JSON_MEDIA_TYPES or media in JSONL_MEDIA_TYPES:
        check_containers(body)
    if media in JSON_MEDIA_TYPES:
        return _parse_json(body, limits)
    if media in JSONL_MEDIA_TYPES:
        return parse_jsonl(body, limits)
    shown = media or "(none)"
    raise _body_error(
        415,
        "Content-Type",
        f"unsupported Content-Type {shown!r}; send application/json or application/jsonl",
    )


def check_containers(body: bytes) -> None:
    """Refuse, before parsing, a body whose JSON containers would cost far more memory than its
    bytes: more than MAX_CONTAINERS_PER_BODY objects/lists, or fewer than MAX_BYTES_PER_CONTAINER
    bytes per container. Brackets inside strings do not count (counted exactly only when the cheap
    raw count is over a limit)."""
    raw = body.count(b"[") + body.count(b"{")
    limit = min(MAX_CONTAINERS_PER_BODY, max(1000, len(body) // MAX_BYTES_PER_CONTAINER))
    if raw <= limit:
        return
    count = _count_containers(body)
    if count > limit:
        raise _body_error(
            413 if count > MAX_CONTAINERS_PER_BODY else 400,
            "body",
            f"too many JSON objects/lists ({count}); at most {limit} for a body of {len(body)} bytes",
        )


def _count_containers(body: bytes) -> int:
    outside = _JSON_STRING.sub(b"", body)
    return outside.count(b"[") + outside.count(b"{")


def strip_bom(body: bytes) -> bytes:
    """The body without a leading UTF-8 byte order mark (only there: one later in the body is an error)."""
    return body[len(UTF8_BOM) :] if body.startswith(UTF8_BOM) else body


def _decode(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _body_error(400, "body", f"body is not valid UTF-8 (byte {exc.start})") from None


def _parse_json(body: bytes, limits: Limits) -> ParsedBody:
    text = _decode(strip_bom(body))
    if not text.strip():
        raise _body_error(400, "body", "body is empty; expected a JSON object with an 'items' list")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _body_error(
            400, "body", f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _body_error(400, "body", f"body is not valid JSON: {_parse_problem(exc)}") from None
    if not isinstance(doc, dict):
        raise _body_error(400, "body", f"body must be a JSON object, got {_type_name(doc)}")
    errors = [
        FieldError(None, key[:100], f"unknown field; allowed: {', '.join(sorted(BODY_FIELDS))}")
        for key in doc
        if key not in BODY_FIELDS
    ]
    if "items" not in doc:
        errors.append(FieldError(None, "items", "required: a list of items"))
    items = doc.get("items")
    if "items" in doc and not isinstance(items, list):
        errors.append(FieldError(None, "items", f"must be a list, got {_type_name(items)}"))
    metadata = doc.get("metadata", {})
    errors.extend(_metadata_errors(metadata) or reserved_metadata_errors(metadata))
    if errors:
        raise SubmissionError(400, errors)
    _check_count(len(items), limits)
    return ParsedBody(
        items=items,
        metadata=metadata,
        priority=doc.get("priority"),
        completion_window=doc.get("completion_window"),
    )


@dataclass(frozen=True)
class BatchOptions:
    priority: str = BatchPriority.NORMAL
    completion_window: str = ""
    window: timedelta | None = None


def parse_window(value: str) -> timedelta | None:
    """'15m' → 15 minutes; None if the text is not of the form ^[1-9][0-9]*(s|m|h|d)$."""
    if not COMPLETION_WINDOW_RE.match(value):
        return None
    return timedelta(seconds=int(value[:-1]) * WINDOW_UNITS[value[-1]])


def batch_options(priority: Any = None, completion_window: Any = None) -> BatchOptions:
    """Validate the batch options; raise SubmissionError(400) naming each bad field."""
    errors: list[FieldError] = []
    if priority is None or priority == "":
        priority = BatchPriority.NORMAL.value
    elif priority not in PRIORITIES:
        errors.append(FieldError(None, "priority", f"must be one of {', '.join(PRIORITIES)}"))
    window = None
    if completion_window is None or completion_window == "":
        completion_window = ""
    elif not isinstance(completion_window, str):
        errors.append(
            FieldError(
                None, "completion_window", f"must be a string like '15m', got {_type_name(completion_window)}"
            )
        )
    else:
        window = parse_window(completion_window)
        if window is None or not (MIN_COMPLETION_WINDOW <= window <= MAX_COMPLETION_WINDOW):
            errors.append(
                FieldError(
                    None,
                    "completion_window",
                    "must match ^[1-9][0-9]*(s|m|h|d)$ and lie between 10s and 7d (e.g. '15m', '24h')",
                )
            )
    if errors:
        raise SubmissionError(400, errors)
    return BatchOptions(priority=str(priority), completion_window=completion_window, window=window)


def parse_jsonl(body: bytes, limits: Limits | None = None) -> ParsedBody:
    """One JSON item per line; blank lines are ignored. `index` counts items; `line` (and the message)
    names the body's line. A leading UTF-8 BOM is dropped."""
    limits = limits or Limits.from_settings()
    body = strip_bom(body)
    _decode(body)  # strict UTF-8 up front (json.loads on bytes would also guess UTF-16/32)
    lines = body.split(b"\n")
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    _check_count(len(numbered), limits)
    sizes = [len(line) for _, line in numbered]
    items: list[Any] = []
    errors: list[FieldError] = []
    for index, (lineno, line) in enumerate(numbered):
        size = sizes[index]
        if size > limits.max_item_bytes:
            errors.append(
                FieldError(
                    index,
                    "item",
                    f"line {lineno}: item is {size} bytes; at most {limits.max_item_bytes} bytes per item",
                    lineno,
                )
            )
            items.append(None)
            continue
        try:
            items.append(json.loads(line, parse_constant=_reject_constant))
        except (ValueError, RecursionError) as exc:
            problem = _parse_problem(exc)
            errors.append(FieldError(index, "item", f"line {lineno}: not valid JSON: {problem}", lineno))
            items.append(None)
    if errors:
        raise SubmissionError(400, errors)
    return ParsedBody(items=items, item_sizes=sizes, item_lines=[lineno for lineno, _ in numbered])


def _reject_constant(name: str) -> None:
    # Python's json accepts NaN/Infinity, which are not JSON (and PostgreSQL jsonb refuses them).
    raise ValueError(f"{name} is not a valid JSON value")


def _parse_problem(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, UnicodeDecodeError):
        return "not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _check_count(count: int, limits: Limits) -> None:
    if count == 0:
        raise _body_error(400, "items", "must contain at least one item")
    if count > limits.max_items:
        raise _body_error(400, "items", f"{count} items; at most {limits.max_items} items per batch")


def _metadata_errors(metadata: Any) -> list[FieldError]:
    if not isinstance(metadata, dict):
        return [FieldError(None, "metadata", f"must be an object, got {_type_name(metadata)}")]
    try:
        text = _ENCODER.encode(metadata)
    except (ValueError, RecursionError) as exc:
        return [FieldError(None, "metadata", f"cannot be stored as JSON: {_parse_problem(exc)}")]
    if not _is_encodable(text):
        return [FieldError(None, "metadata", "contains invalid Unicode (a lone surrogate escape)")]
    if "\\u0000" in text and _contains_nul(metadata):
        return [FieldError(None, "metadata", "must not contain NUL (\\u0000) characters")]
    size = len(text.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        return [FieldError(None, "metadata", f"is {size} bytes; at most {MAX_METADATA_BYTES} bytes")]
    return []


def reserved_metadata_keys(metadata: Any) -> list[str]:
    """The keys of ``metadata`` only the gateway may write ("retry_of", "gateway_…", any letter case)."""
    if not isinstance(metadata, dict):
        return []
    return [
        key
        for key in metadata
        if isinstance(key, str)
        and (key.casefold() in RESERVED_METADATA_KEYS or key.casefold().startswith(RESERVED_METADATA_PREFIX))
    ]


def reserved_metadata_errors(metadata: Any) -> list[FieldError]:
    """400s for a client's metadata that holds a gateway-written key (every client-facing surface checks
    this; the gateway's own writers, e.g. batches.retry, call submit_batch directly)."""
    return [
        FieldError(
            None,
            f"metadata.{key[:100]}",
            f"the key {key[:100]!r} is reserved for what the gateway writes itself "
            f"({', '.join(sorted(RESERVED_METADATA_KEYS))}, {RESERVED_METADATA_PREFIX}…); use another key",
        )
        for key in reserved_metadata_keys(metadata)
    ]


def close_name(name: str, names: Iterable[str]) -> str | None:
    """The known name closest to a misspelt one (difflib), or None when nothing is close."""
    matches = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _contains_nul(value: Any) -> bool:
    """Any NUL in any string (keys too), however deep (iterative: no recursion limit)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if "\x00" in current:
                return True
        elif isinstance(current, dict):
            stack.extend(current.keys())
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counting at most to ``limit + 1`` (iterative)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((v, depth) for v in (current.values() if isinstance(current, dict) else current))
    return deepest


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# --- validation -----------------------------------------------------------------------------------


# One shared encoder: json.dumps() with non-default options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class ValidItem:
    seq: int
    custom_id: str
    route: str
    provider: str
    payload: dict[str, Any]
    payload_json: str


class _Validator:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.routes = known_route_names()
        self.providers = dict(Provider.objects.values_list("name", "enabled"))
        self.seen: dict[str, int] = {}
        self.errors: list[FieldError] = []
        self.error_count = 0
        self.hints: dict[tuple[str, str], str] = {}

    def err(self, index: int, field_name: str, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(FieldError(index, field_name, message))

    def item(self, i: int, item: Any, raw_size: int | None) -> ValidItem | None:
        if not isinstance(item, dict):
            self.err(i, "item", f"must be an object, got {_type_name(item)}")
            return None
        before = self.error_count
        if not ITEM_FIELDS.issuperset(item):
            for key in item:
                if key not in ITEM_FIELDS:
                    self.err(i, str(key)[:100], f"unknown field; allowed: {', '.join(sorted(ITEM_FIELDS))}")
        custom_id = self._custom_id(i, item)
        route, provider = self._target(i, item)
        messages = self._messages(i, item)
        params = self._params(i, item)
        if self.error_count != before:
            return None
        payload = {"messages": messages, "params": params}
        try:
            payload_json = _ENCODER.encode(payload)
        except (ValueError, RecursionError) as exc:  # NaN/Infinity from Python callers, absurd nesting
            self.err(i, "item", f"cannot be stored as JSON: {_parse_problem(exc)}")
            return None
        if payload_json.isascii():
            encoded_size = len(payload_json)
        else:
            try:
                encoded_size = len(payload_json.encode("utf-8"))
            except UnicodeEncodeError:
                self.err(i, "item", "contains invalid Unicode (a lone surrogate escape such as \\ud800)")
                return None
        if "\\u0000" in payload_json and _contains_nul(payload):
            # PostgreSQL text and jsonb cannot hold NUL characters.
            self.err(i, "item", "must not contain NUL (\\u0000) characters")
            return None
        size = raw_size if raw_size is not None else encoded_size + len(custom_id)
        if size > self.limits.max_item_bytes:
            self.err(i, "item", f"item is {size} bytes; at most {self.limits.max_item_bytes} bytes per item")
            return None
        return ValidItem(i, custom_id, route, provider, payload, payload_json)

    def _custom_id(self, i: int, item: dict) -> str:
        if "custom_id" not in item:
            self.err(i, "custom_id", "required: a string unique in the batch")
            return ""
        value = item["custom_id"]
        if not isinstance(value, str):
            self.err(i, "custom_id", f"must be a string, got {_type_name(value)}")
            return ""
        if not value.strip():
            self.err(i, "custom_id", "must not be empty")
        elif len(value) > MAX_CUSTOM_ID_CHARS:
            self.err(i, "custom_id", f"is {len(value)} characters; at most {MAX_CUSTOM_ID_CHARS}")
        elif _CONTROL.search(value) or not _is_encodable(value):
            self.err(
                i, "custom_id", "must not contain control characters (NUL, tab, newline …) or invalid Unicode"
            )
        elif value in self.seen:
            self.err(i, "custom_id", f"duplicate custom_id {value!r}; first used by item {self.seen[value]}")
        else:
            self.seen[value] = i
        return value

    def _name(self, i: int, item: dict, key: str) -> str | None:
        value = item[key]
        if not isinstance(value, str):
            self.err(i, key, f"must be a string, got {_type_name(value)}")
            return None
        if not value:
            self.err(i, key, "must not be empty")
            return None
        if len(value) > MAX_NAME_CHARS:
            self.err(i, key, f"is {len(value)} characters; at most {MAX_NAME_CHARS}")
            return None
        return value

    def _target(self, i: int, item: dict) -> tuple[str, str]:
        has_route, has_provider = "route" in item, "provider" in item
        if has_route and has_provider:
            self.err(i, "route", "give exactly one of 'route' or 'provider', not both")
            return "", ""
        if not has_route and not has_provider:
            self.err(i, "route", "one of 'route' or 'provider' is required")
            return "", ""
        if has_route:
            route = self._name(i, item, "route")
            if route is not None and route not in self.routes:
                self.err(i, "route", self._hinted("route", route))
            return route or "", ""
        provider = self._name(i, item, "provider")
        if provider is not None:
            enabled = self.providers.get(provider)
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
            self.hints[key] = self._unknown_name(kind, name)
        return self.hints[key]

    def _unknown_name(self, kind: str, name: str) -> str:
        sep = HINT_SEPARATOR
        if kind == "route":
            if name in self.providers:
                disabled = "" if self.providers[name] else " (disabled)"
                return f'unknown route {name!r}{sep}{name!r} is a provider{disabled}: use "provider": {json.dumps(name)}'
            message = f"unknown route {name!r}: no enabled routing rule to an enabled provider"
            if guess := close_name(name, self.routes):
                return f"{message}{sep}did you mean {guess!r}?"
            if guess := close_name(name, self.providers):
                return f'{message}{sep}did you mean "provider": {json.dumps(guess)}?'
            return message
        message = f"unknown provider {name!r}"
        if name in self.routes:
            return f'{message}{sep}{name!r} is a route: use "route": {json.dumps(name)}'
        if guess := close_name(name, self.providers):
            return f"{message}{sep}did you mean {guess!r}?"
        return message

    def _messages(self, i: int, item: dict) -> list:
        has_messages, has_query = "messages" in item, "query" in item
        if has_messages and has_query:
            self.err(i, "messages", "give exactly one of 'messages' or 'query', not both")
            return []
        if not has_messages and not has_query:
            self.err(i, "messages", "one of 'messages' or 'query' is required")
            return []
        if has_query:
            query = item["query"]
            if not isinstance(query, str):
                self.err(i, "query", f"must be a string, got {_type_name(query)}")
            elif not query.strip():
                self.err(i, "query", "must not be empty")
            elif len(query) > self.limits.max_item_bytes:
                self.err(
                    i, "query", f"is {len(query)} characters; at most {self.limits.max_item_bytes} per item"
                )
            else:
                return [{"role": "user", "content": query}]
            return []
        messages = item["messages"]
        if not isinstance(messages, list):
            self.err(
                i, "messages", f"must be a list of {{role, content}} objects, got {_type_name(messages)}"
            )
            return []
        if not messages:
            self.err(i, "messages", "must contain at least one message")
            return []
        if len(messages) > MAX_MESSAGES:
            self.err(i, "messages", f"{len(messages)} messages; at most {MAX_MESSAGES}")
            return []
        for k, message in enumerate(messages):
            where = f"messages[{k}]"
            if not isinstance(message, dict):
                self.err(i, where, f"must be an object with 'role' and 'content', got {_type_name(message)}")
                continue
            role = message.get("role")
            if "role" not in message:
                self.err(i, f"{where}.role", f"required: one of {', '.join(sorted(ROLES))}")
            elif role not in ROLES:
                shown = role if isinstance(role, str) else _type_name(role)
                self.err(i, f"{where}.role", f"{str(shown)[:50]!r} is not one of {', '.join(sorted(ROLES))}")
            if "content" not in message:
                self.err(i, f"{where}.content", "required: a string (or a list of content parts)")
            elif not isinstance(message["content"], str | list):
                self.err(
                    i,
                    f"{where}.content",
                    f"must be a string or a list of content parts, got {_type_name(message['content'])}",
                )
            elif isinstance(message["content"], list):
                self._content_parts(i, f"{where}.content", message["content"])
        return messages

    def _content_parts(self, i: int, where: str, parts: list) -> None:
        """A list of at most MAX_CONTENT_PARTS objects, each with a string 'type', nested at most
        MAX_PARAMS_DEPTH levels (images, audio and text parts are flat objects)."""
        if len(parts) > MAX_CONTENT_PARTS:
            self.err(i, where, f"{len(parts)} content parts; at most {MAX_CONTENT_PARTS}")
            return
        for k, part in enumerate(parts):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                self.err(i, f"{where}[{k}]", "must be an object with a string 'type'")
                return
            if _depth(part, MAX_PARAMS_DEPTH) > MAX_PARAMS_DEPTH:
                self.err(i, f"{where}[{k}]", f"nested deeper than {MAX_PARAMS_DEPTH} levels")
                return

    def _params(self, i: int, item: dict) -> dict:
        if "params" not in item:
            return {}
        params = item["params"]
        if not isinstance(params, dict):
            self.err(i, "params", f"must be an object, got {_type_name(params)}")
            return {}
        for key in params:
            if key in RESERVED_PARAMS:
                self.err(i, f"params.{key}", "is set by the gateway; remove it")
        if _depth(params, MAX_PARAMS_DEPTH) > MAX_PARAMS_DEPTH:
            self.err(i, "params", f"nested deeper than {MAX_PARAMS_DEPTH} levels")
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


def validate_items(
    items: Sequence[Any],
    item_sizes: Sequence[int] | None = None,
    limits: Limits | None = None,
    item_lines: Sequence[int] | None = None,
) -> list[ValidItem]:
    """Validate every item; raise SubmissionError(400) listing the first 100 problems, or return all.
    With ``item_lines`` (a JSONL body's line per item) each error names its line too."""
    limits = limits or Limits.from_settings()
    _check_count(len(items), limits)
    validator = _Validator(limits)
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


# --- storing --------------------------------------------------------------------------------------


def submit_batch(
    *,
    team: Team,
    items: Sequence[Any],
    metadata: dict[str, Any] | None = None,
    api_key: ApiKey | None = None,
    item_sizes: Sequence[int] | None = None,
    options: BatchOptions | None = None,
    idempotency: Idempotency | None = None,
    item_lines: Sequence[int] | None = None,
) -> Batch:
    """Validate `items` and store a queued batch with its items in one transaction.

    Raises SubmissionError (nothing stored) when any item or the metadata is invalid. After commit,
    `batches.tasks.start_batch.delay(batch_id)` is called. With ``idempotency`` the batch row carries
    its key and request hash (see ``submit_idempotent``); a concurrent twin raises IntegrityError.
    """
    metadata = {} if metadata is None else metadata
    metadata_errors = _metadata_errors(metadata)
    if metadata_errors:
        raise SubmissionError(400, metadata_errors)
    options = options or BatchOptions()
    valid = validate_items(items, item_sizes, item_lines=item_lines)
    check_budget(team, valid)
    with transaction.atomic():
        queue_limits.check(team, len(valid))  # locks the team's row until this commits
        now = timezone.now()
        batch = Batch.objects.create(
            team=team,
            api_key=api_key,
            status=BatchStatus.QUEUED,
            metadata=metadata,
            total_count=len(valid),
            priority=options.priority,
            completion_window=options.completion_window,
            expires_at=now + options.window if options.window else None,
            idempotency_key=idempotency.key if idempotency else "",
            request_hash=idempotency.request_hash if idempotency else "",
        )
        insert_items(batch, valid)
        batch_id = str(batch.id)
        transaction.on_commit(lambda: enqueue_start(batch_id))
    return batch


def check_budget(team: Team, valid: Sequence[ValidItem]) -> None:
    """Raise BudgetRefused (429, nothing stored) if the batch's estimated tokens exceed the team's
    remaining daily or monthly budget."""
    if team.daily_token_budget is None and team.monthly_token_budget is None:
        return
    from batches import budget

    refusal = budget.budget_refusal(team, budget.estimate_payload_tokens(v.payload for v in valid))
    if refusal is not None:
        raise BudgetRefused(refusal)


def submit_body(
    *,
    team: Team,
    body: bytes,
    content_type: str | None,
    api_key: ApiKey | None = None,
    query: dict[str, str] | None = None,
    idempotency: Idempotency | None = None,
) -> Batch:
    """Parse a raw request body (JSON or JSONL) and submit it. Raises SubmissionError.

    Batch options come from the JSON body's top level, or from ``query`` (the request's query
    parameters) for a JSONL body."""
    parsed = parse_body(body, content_type)  # containers bounded before parsing; GC stays on
    if parsed.item_sizes is not None:  # JSONL: options travel as query parameters
        query = query or {}
        parsed.priority, parsed.completion_window = query.get("priority"), query.get("completion_window")
    options = batch_options(parsed.priority, parsed.completion_window)
    return submit_batch(
        team=team,
        items=parsed.items,
        metadata=parsed.metadata,
        api_key=api_key,
        item_sizes=parsed.item_sizes,
        options=options,
        idempotency=idempotency,
        item_lines=parsed.item_lines,
    )


# --- Idempotency-Key ------------------------------------------------------------------------------

IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")  # visible ASCII, no spaces


@dataclass(frozen=True)
class Idempotency:
    key: str
    request_hash: str


class IdempotencyConflict(Exception):
    """The key was already used by this team for a different request (HTTP 409)."""

    def __init__(self, batch: Batch):
        self.batch = batch
        super().__init__(
            f"Idempotency-Key already used for batch {batch.id} with a different request; "
            "use a new key for a new batch"
        )


def request_hash(body: bytes, content_type: str | None, query: dict[str, str] | None = None) -> str:
    """SHA-256 over what decides the batch: the media type, the JSONL options and the body bytes."""
    digest = hashlib.sha256()
    digest.update(media_type_of(content_type).encode() + b"\n")
    for name in ("priority", "completion_window"):
        digest.update(f"{name}={(query or {}).get(name) or ''}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def submit_idempotent(
    *, team: Team, key: str | None, request_hash: str, submit: Callable[[Idempotency | None], Batch]
) -> tuple[Batch, bool]:
    """Run ``submit`` at most once per (team, Idempotency-Key). Returns (batch, created).

    No key: ``submit(None)``. A key seen before with the same request hash: the first batch, not
    created again (whatever it became since). With another hash: IdempotencyConflict. Two requests
    racing with one key: the unique constraint lets one insert; the other gets its batch (or the 409).
    A bad key is a SubmissionError naming the header. Callers: POST /api/v1/batches and any other
    submission endpoint (``submit`` wraps submit_body / submit_batch with its own arguments)."""
    if key is None or key == "":
        return submit(None), True
    if not IDEMPOTENCY_KEY_RE.match(key):
        raise _body_error(400, "Idempotency-Key", "must be 1-255 visible ASCII characters (no spaces)")
    existing = _batch_for_key(team, key, request_hash)
    if existing is not None:
        return existing, False
    try:
        return submit(Idempotency(key, request_hash)), True
    except IntegrityError:
        existing = _batch_for_key(team, key, request_hash)
        if existing is None:
            raise
        return existing, False


def _batch_for_key(team: Team, key: str, request_hash: str) -> Batch | None:
    batch = Batch.objects.filter(team=team, idempotency_key=key).first()
    if batch is not None and batch.request_hash != request_hash:
        raise IdempotencyConflict(batch)
    return batch


log = logging.getLogger(__name__)


def enqueue_start(batch_id: str) -> None:
    """Hand a stored batch to the execution engine (called on commit).

    With workers, this makes sure dispatchers run (``ensure_dispatchers``: dispatch tasks queued from
    here) and queues `start_batch`. In single-process mode (GATEWAY_BACKGROUND_EAGER) the eager
    task runs on a background thread of this process instead of inside the submitting request; the
    thread is not a daemon, so a command-line submitter's process stays until its batch has ended.
    """
    from batches.tasks import start_batch  # the engine's module; imported late to keep apps decoupled

    if settings.GATEWAY_BACKGROUND_EAGER:
        run = contextvars.copy_context().run  # the request id (logs) follows the batch onto the thread
        threading.Thread(target=run, args=(_run_in_background, batch_id), name=f"batch-{batch_id}").start()
        return
    try:
        # the submission itself starts dispatchers when fewer than GATEWAY_DISPATCHERS are alive (no wait
        # for start_batch to reach a free worker child, nor for the reconciler's next pass); running
        # dispatchers see the new batch at their next look at the queue (0.5 s)
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            from batches.tasks import ensure_dispatchers

            ensure_dispatchers()
        start_batch.delay(batch_id)
    except Exception:  # the batch is stored: the workers' reconciler starts it once the broker is back
        log.exception("batch %s stored but could not be enqueued; the reconciler will start it", batch_id)


def _run_in_background(batch_id: str) -> None:
    from batches.tasks import start_batch

    try:
        start_batch.delay(batch_id)  # eager: runs here, on this thread
    except Exception:
        log.exception("batch %s failed in the single-process engine thread", batch_id)
    finally:
        connections.close_all()


def insert_items(batch: Batch, valid: Iterable[ValidItem]) -> None:
    queue = queue_namer(str(batch.id))
    if connection.vendor == "postgresql":
        _copy_items(batch, valid, queue)
    else:
        _bulk_create_items(batch, valid, queue)


def queue_namer(batch_id: str) -> Callable[[ValidItem], str]:
    """The scheduler's queue of an item (``BatchItem.queue_provider``): its preferred provider, drawn
    exactly as the engine will (``candidates(...)[0]``, salt = batch id), or "" when unroutable now.
    Routes whose first choice does not depend on the draw are resolved once per route."""
    from batches.execution.config import load_routing_table  # the engine's view of providers

    table = load_routing_table()
    fixed: dict[tuple[str, str], str | None] = {}

    def first(route: str, provider: str, draw: float) -> str:
        try:
            return candidates(table, route=route, provider=provider, draw=draw)[0].name
        except RoutingError:
            return ""

    def name(v: ValidItem) -> str:
        key = (v.route, v.provider)
        if key not in fixed:
            low, high = first(v.route, v.provider, 0.0), first(v.route, v.provider, 1 - 2**-53)
            fixed[key] = low if low == high else None
        known = fixed[key]
        if known is not None:
            return known
        return first(v.route, v.provider, stable_draw(batch_id, v.custom_id))

    return name


def _copy_items(batch: Batch, valid: Iterable[ValidItem], queue: Callable[[ValidItem], str]) -> None:
    table = connection.ops.quote_name(BatchItem._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in COPY_COLUMNS)
    now = timezone.now()
    pending = ItemStatus.PENDING.value
    batch_id = batch.id
    with connection.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for v in valid:
                copy.write_row(
                    (batch_id, v.seq, v.custom_id, v.route, v.provider, queue(v), v.payload_json, pending, "", 0, "", "", 0,
                     "[]", "", now)
                )  # fmt: skip


def _bulk_create_items(batch: Batch, valid: Iterable[ValidItem], queue: Callable[[ValidItem], str]) -> None:
    rows = [
        BatchItem(
            batch=batch,
            seq=v.seq,
            custom_id=v.custom_id,
            route=v.route,
            requested_provider=v.provider,
            queue_provider=queue(v),
            payload=v.payload,
            status=ItemStatus.PENDING,
        )
        for v in valid
    ]
    BatchItem.objects.bulk_create(rows, batch_size=SQLITE_CHUNK)

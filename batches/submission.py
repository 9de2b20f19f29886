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

import gc
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
from django.db import connection, connections, transaction
from django.utils import timezone

from providers.models import Provider
from providers.routing import RoutingError, candidates, stable_draw
from providers.selectors import known_route_names

from .models import ApiKey, Batch, BatchItem, BatchPriority, BatchStatus, ItemStatus, Team

MAX_ERRORS = 100  # errors listed in one response; `error_count` gives the total
MAX_CUSTOM_ID_CHARS = 255
MAX_NAME_CHARS = 64  # route / provider names (the model fields' max_length)
MAX_METADATA_BYTES = 16 * 1024
ROLES = frozenset({"system", "user", "assistant", "tool"})
ITEM_FIELDS = frozenset({"custom_id", "route", "provider", "messages", "query", "params"})
BODY_FIELDS = frozenset({"items", "metadata", "priority", "completion_window"})
# Batch options: top-level JSON fields, or query parameters for a JSONL body (contract §4).
PRIORITIES = tuple(p.value for p in BatchPriority)
COMPLETION_WINDOW_RE = re.compile(r"^[1-9][0-9]*(s|m|h|d)$")
WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_COMPLETION_WINDOW = timedelta(seconds=10)
MAX_COMPLETION_WINDOW = timedelta(days=7)
# The gateway sets these itself: {"model": provider.model, "messages": ..., **params}; a caller's value
# would silently override the provider's model or the messages, and streaming is not supported.
RESERVED_PARAMS = frozenset({"model", "messages", "stream"})

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
    """One problem: `index` is the item's 0-based position (None for body-level problems)."""

    index: int | None
    field: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": _safe(self.field), "message": _safe(self.message)}


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


@dataclass
class ParsedBody:
    items: list[Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    priority: Any = None
    completion_window: Any = None
    # Raw size in bytes of each item as sent (JSONL lines); None when the body was one JSON document.
    item_sizes: list[int] | None = None


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


def _decode(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _body_error(400, "body", f"body is not valid UTF-8 (byte {exc.start})") from None


def _parse_json(body: bytes, limits: Limits) -> ParsedBody:
    text = _decode(body)
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
    errors.extend(_metadata_errors(metadata))
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
    """One JSON item per line; blank lines are ignored. `index` counts items, messages name the line."""
    limits = limits or Limits.from_settings()
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
                )
            )
            items.append(None)
            continue
        try:
            items.append(json.loads(line, parse_constant=_reject_constant))
        except (ValueError, RecursionError) as exc:
            errors.append(FieldError(index, "item", f"line {lineno}: not valid JSON: {_parse_problem(exc)}"))
            items.append(None)
    if errors:
        raise SubmissionError(400, errors)
    return ParsedBody(items=items, item_sizes=sizes)


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


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _contains_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_contains_nul(v) for v in value)
    return False


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
        elif "\x00" in value or not _is_encodable(value):
            self.err(i, "custom_id", "must not contain NUL characters or invalid Unicode")
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
                self.err(
                    i, "route", f"unknown route {route!r}: no enabled routing rule to an enabled provider"
                )
            return route or "", ""
        provider = self._name(i, item, "provider")
        if provider is not None:
            enabled = self.providers.get(provider)
            if enabled is None:
                self.err(i, "provider", f"unknown provider {provider!r}")
            elif not enabled:
                self.err(i, "provider", f"provider {provider!r} is disabled")
        return "", provider or ""

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
        return messages

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
        if "max_tokens" in params:
            value = params["max_tokens"]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                self.err(i, "params.max_tokens", "must be a positive integer")
        return params


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building ~10^5 short-lived containers.

    The objects made here (parsed items, normalized payloads) hold no reference cycles; without this
    the collector re-scans the growing heap again and again (≈20-30% of ingest time for 100k items).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def validate_items(
    items: Sequence[Any], item_sizes: Sequence[int] | None = None, limits: Limits | None = None
) -> list[ValidItem]:
    """Validate every item; raise SubmissionError(400) listing the first 100 problems, or return all."""
    limits = limits or Limits.from_settings()
    _check_count(len(items), limits)
    validator = _Validator(limits)
    valid: list[ValidItem] = []
    for i, item in enumerate(items):
        result = validator.item(i, item, item_sizes[i] if item_sizes is not None else None)
        if result is not None:
            valid.append(result)
    if validator.error_count:
        raise SubmissionError(400, validator.errors, validator.error_count)
    return valid


# --- storing --------------------------------------------------------------------------------------


def submit_batch(
    *,
    team: Team,
    items: Sequence[Any],
    metadata: dict[str, Any] | None = None,
    api_key: ApiKey | None = None,
    item_sizes: Sequence[int] | None = None,
    options: BatchOptions | None = None,
) -> Batch:
    """Validate `items` and store a queued batch with its items in one transaction.

    Raises SubmissionError (nothing stored) when any item or the metadata is invalid. After commit,
    `batches.tasks.start_batch.delay(batch_id)` is called.
    """
    metadata = {} if metadata is None else metadata
    metadata_errors = _metadata_errors(metadata)
    if metadata_errors:
        raise SubmissionError(400, metadata_errors)
    options = options or BatchOptions()
    with paused_gc():
        valid = validate_items(items, item_sizes)
    with transaction.atomic():
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
        )
        insert_items(batch, valid)
        batch_id = str(batch.id)
        transaction.on_commit(lambda: enqueue_start(batch_id))
    return batch


def submit_body(
    *,
    team: Team,
    body: bytes,
    content_type: str | None,
    api_key: ApiKey | None = None,
    query: dict[str, str] | None = None,
) -> Batch:
    """Parse a raw request body (JSON or JSONL) and submit it. Raises SubmissionError.

    Batch options come from the JSON body's top level, or from ``query`` (the request's query
    parameters) for a JSONL body."""
    with paused_gc():
        parsed = parse_body(body, content_type)
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
    )


log = logging.getLogger(__name__)


def enqueue_start(batch_id: str) -> None:
    """Hand a stored batch to the execution engine (called on commit).

    With workers, this queues `start_batch`. In single-process mode (GATEWAY_BACKGROUND_EAGER) the eager
    task runs on a background thread of this process instead of inside the submitting request; the
    thread is not a daemon, so a command-line submitter's process stays until its batch has ended.
    """
    from batches.tasks import start_batch  # the engine's module; imported late to keep apps decoupled

    if settings.GATEWAY_BACKGROUND_EAGER:
        threading.Thread(target=_run_in_background, args=(batch_id,), name=f"batch-{batch_id}").start()
        return
    try:
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

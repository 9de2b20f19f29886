"""Request bodies: a JSON document (``{"items": [...], "metadata": {...}, ...}``) or JSONL (one item
per line), bounded in bytes, items and JSON containers before and while parsing. Returns the raw
items and options; the items are validated afterwards (``validation``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .caps import MAX_BYTES_PER_CONTAINER, MAX_CONTAINERS_PER_BODY, Limits
from .errors import FieldError, SubmissionError, body_error
from .json_values import parse_problem, reject_constant, type_name
from .metadata import metadata_errors, reserved_metadata_errors

# A UTF-8 byte order mark (Excel, Notepad) before a JSON or JSONL body is not part of it.
UTF8_BOM = b"\xef\xbb\xbf"
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
BODY_FIELDS = frozenset(
    {
        "items",
        "metadata",
        "priority",
        "completion_window",
        "cache",
        "webhook_url",
        "provider_batch",
        "steps",
        "targets",
    }
)
JSON_MEDIA_TYPES = frozenset({"application/json"})
JSONL_MEDIA_TYPES = frozenset({"application/jsonl", "application/x-ndjson", "application/jsonlines"})


@dataclass
class ParsedBody:
    items: list[Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    priority: Any = None
    completion_window: Any = None
    webhook_url: Any = None
    cache: Any = None
    provider_batch: Any = None
    steps: Any = None  # the pipeline's steps as sent (batches.submission.steps checks them)
    targets: Any = None  # an evaluation's targets as sent (batches.submission.fanout checks them)
    # Raw size in bytes of each item as sent (JSONL lines); None when the body was one JSON document.
    item_sizes: list[int] | None = None
    # 1-based line of each item in a JSONL body (blank lines are skipped); None for a JSON document.
    item_lines: list[int] | None = None


def media_type_of(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_body_size(length: int, limits: Limits | None = None) -> None:
    limits = limits or Limits.from_settings()
    if length > limits.max_body_bytes:
        raise body_error(
            413, "body", f"request body is {length} bytes; the limit is {limits.max_body_bytes} bytes"
        )


def check_count(count: int, limits: Limits) -> None:
    """At least one item and at most ``limits.max_items``."""
    if count == 0:
        raise body_error(400, "items", "must contain at least one item")
    if count > limits.max_items:
        raise body_error(400, "items", f"{count} items; at most {limits.max_items} items per batch")


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
    raise body_error(
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
        raise body_error(
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
        raise body_error(400, "body", f"body is not valid UTF-8 (byte {exc.start})") from None


def _load_document(body: bytes) -> Any:
    text = _decode(strip_bom(body))
    if not text.strip():
        raise body_error(400, "body", "body is empty; expected a JSON object with an 'items' list")
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise body_error(
            400, "body", f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise body_error(400, "body", f"body is not valid JSON: {parse_problem(exc)}") from None


def _parse_json(body: bytes, limits: Limits) -> ParsedBody:
    doc = _load_document(body)
    if not isinstance(doc, dict):
        raise body_error(400, "body", f"body must be a JSON object, got {type_name(doc)}")
    errors = [
        FieldError(None, key[:100], f"unknown field; allowed: {', '.join(sorted(BODY_FIELDS))}")
        for key in doc
        if key not in BODY_FIELDS
    ]
    if "items" not in doc:
        errors.append(FieldError(None, "items", "required: a list of items"))
    items = doc.get("items")
    if "items" in doc and not isinstance(items, list):
        errors.append(FieldError(None, "items", f"must be a list, got {type_name(items)}"))
    metadata = doc.get("metadata", {})
    errors.extend(metadata_errors(metadata) or reserved_metadata_errors(metadata))
    if errors:
        raise SubmissionError(400, errors)
    assert isinstance(items, list)  # checked above
    check_count(len(items), limits)
    return ParsedBody(
        items=items,
        metadata=metadata,
        priority=doc.get("priority"),
        completion_window=doc.get("completion_window"),
        webhook_url=doc.get("webhook_url"),
        cache=doc.get("cache"),
        provider_batch=doc.get("provider_batch"),
        steps=doc.get("steps"),
        targets=doc.get("targets"),
    )


def parse_jsonl(body: bytes, limits: Limits | None = None) -> ParsedBody:
    """One JSON item per line; blank lines are ignored. `index` counts items; `line` (and the message)
    names the body's line. A leading UTF-8 BOM is dropped."""
    limits = limits or Limits.from_settings()
    body = strip_bom(body)
    _decode(body)  # strict UTF-8 up front (json.loads on bytes would also guess UTF-16/32)
    lines = body.split(b"\n")
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    check_count(len(numbered), limits)
    sizes = [len(line) for _, line in numbered]
    items: list[Any] = []
    errors: list[FieldError] = []
    for index, (lineno, line) in enumerate(numbered):
        item, error = _parse_line(index, lineno, line, limits)
        items.append(item)
        if error is not None:
            errors.append(error)
    if errors:
        raise SubmissionError(400, errors)
    return ParsedBody(items=items, item_sizes=sizes, item_lines=[lineno for lineno, _ in numbered])


def _parse_line(index: int, lineno: int, line: bytes, limits: Limits) -> tuple[Any, FieldError | None]:
    """One JSONL line's item, or None and the problem (too large, not JSON)."""
    size = len(line)
    if size > limits.max_item_bytes:
        message = f"line {lineno}: item is {size} bytes; at most {limits.max_item_bytes} bytes per item"
        return None, FieldError(index, "item", message, lineno)
    try:
        return json.loads(line, parse_constant=reject_constant), None
    except (ValueError, RecursionError) as exc:
        problem = parse_problem(exc)
        return None, FieldError(index, "item", f"line {lineno}: not valid JSON: {problem}", lineno)

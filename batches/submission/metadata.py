"""A batch's metadata: an object of at most MAX_METADATA_BYTES that stores as JSON, and none of the
keys only the gateway writes ("retry_of", "gateway_…")."""

from __future__ import annotations

from typing import Any

from .caps import MAX_METADATA_BYTES
from .errors import FieldError
from .json_values import ENCODER, contains_nul, is_encodable, parse_problem, type_name

# Metadata keys the gateway writes itself (batches.retry's "retry_of", anything "gateway_…"): a client may
# not set them (400 naming the key, nothing stored), so what the gateway reads back there is its own.
RESERVED_METADATA_KEYS = frozenset({"retry_of"})
RESERVED_METADATA_PREFIX = "gateway_"


def metadata_errors(metadata: Any) -> list[FieldError]:
    """Problems with ``metadata`` as stored (at most one), reserved keys aside."""
    if not isinstance(metadata, dict):
        return [FieldError(None, "metadata", f"must be an object, got {type_name(metadata)}")]
    try:
        text = ENCODER.encode(metadata)
    except (ValueError, RecursionError) as exc:
        return [FieldError(None, "metadata", f"cannot be stored as JSON: {parse_problem(exc)}")]
    if not is_encodable(text):
        return [FieldError(None, "metadata", "contains invalid Unicode (a lone surrogate escape)")]
    if "\\u0000" in text and contains_nul(metadata):
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

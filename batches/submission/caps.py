"""The size caps of a submission: the settings-driven ``Limits`` (items per batch, body and item
bytes) and the fixed caps on names, metadata, messages, content parts, nesting and JSON containers."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

MAX_CUSTOM_ID_CHARS = 255
MAX_NAME_CHARS = 64  # route / provider names (the model fields' max_length)
MAX_METADATA_BYTES = 16 * 1024
# Resource limits checked on the raw bytes before parsing (a body of nested "[]" is ~30x its size in
# Python objects): JSON containers ({ or [ outside strings) per body, and per item as validated.
MAX_CONTAINERS_PER_BODY = 1_000_000
MAX_BYTES_PER_CONTAINER = 8  # a body must average at least this many bytes per container
MAX_MESSAGES = 1000
MAX_CONTENT_PARTS = 100
MAX_PARAMS_DEPTH = 8


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

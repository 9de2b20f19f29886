"""Crash adoption: which provider batches a chunk's create may have left behind (issue #23).

After a crash between storing a chunk's intent row and recording the provider's batch id, the caller
lists the provider's batches created since the intent (``BatchApiClient.list_since``) and asks
``matches``: OpenAI / Azure batches carry the chunk id in ``metadata.gateway_chunk`` (an exact match);
Anthropic batches carry no metadata, so a batch created at or after the intent with the chunk's request
count matches. One match: adopt it. None: the create never reached the provider (create it). More than
one: ambiguous — log it loudly and leave it to an operator; never create again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..kinds import batch_protocol
from .openai_client import CHUNK_METADATA_KEY
from .types import RemoteBatch


def matches(
    kind: str, batches: Iterable[RemoteBatch], chunk_id: str, created_after: float, line_count: int
) -> list[RemoteBatch]:
    """The listed batches that may be the chunk's (see the module docstring)."""
    if batch_protocol(kind) == "anthropic":  # no metadata on a message batch: its size and time
        return [b for b in batches if b.created_at >= created_after and b.total == line_count]
    floor = math.floor(created_after)  # OpenAI's created_at is whole seconds
    return [b for b in batches if b.metadata.get(CHUNK_METADATA_KEY) == chunk_id and b.created_at >= floor]

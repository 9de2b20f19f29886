"""The batch-API client seam: ``BatchApiClient`` (one Protocol for the three kinds) and ``for_target``.

Every call goes through gateway_engine.http (``BatchHttp``), raises ``BatchApiError`` on failure
(classified like real-time calls) and counts itself in ``http_calls`` (the caller reports
``batch_api_calls``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..http_batch import BatchHttp
from ..kinds import batch_protocol
from .types import BatchLine, BatchTarget, LineResult, RemoteBatch

DEFAULT_WINDOW = "24h"


@runtime_checkable
class BatchApiClient(Protocol):
    """One provider's batch API."""

    target: BatchTarget
    http_calls: int  # HTTP calls made so far (the caller reports them as batch_api_calls)
    envelope_bytes: int  # bytes a create adds around the encoded lines (OpenAI/Azure 0, Anthropic 14)

    def encode_line(self, line: BatchLine) -> bytes:
        """The exact bytes ``line`` adds to what a create sends: OpenAI/Azure the JSONL line with its
        newline (the file holds nothing else), Anthropic the request object with its separating comma
        (the body is these plus ``envelope_bytes``). Callers split chunks by ``batch_max_bytes`` with it.
        ValueError for a custom id the kind refuses (Anthropic ``^[a-zA-Z0-9_-]{1,64}$``)."""
        ...

    async def create(
        self, chunk_id: str, lines: Sequence[BatchLine], window: str = DEFAULT_WINDOW
    ) -> RemoteBatch:
        """Create one provider batch of ``lines``, tagged with ``chunk_id`` (OpenAI/Azure: the file name
        ``{chunk_id}.jsonl`` and ``metadata.gateway_chunk``)."""
        ...

    async def get(self, remote_id: str) -> RemoteBatch: ...

    async def cancel(self, remote_id: str) -> RemoteBatch: ...

    async def results(self, remote: RemoteBatch) -> list[LineResult]:
        """Every line result the provider has for an ended batch (OpenAI/Azure: output + error file;
        Anthropic: the results JSONL, in the provider's order)."""
        ...

    async def list_since(self, created_after: float) -> list[RemoteBatch]:
        """Every batch created at or after ``created_after`` (Unix seconds), all pages."""
        ...

    async def aclose(self) -> None: ...


def for_target(target: BatchTarget, *, http: BatchHttp | None = None) -> BatchApiClient:
    """The client for ``target.kind`` (openai, azure_openai, anthropic). ``http``: a shared
    gateway_engine.http_batch.BatchHttp (default: the client opens its own, aiohttp, with the target's
    timeout, and closes it in ``aclose``)."""
    from .anthropic_client import AnthropicBatchClient
    from .openai_client import OpenAIBatchClient

    protocol = batch_protocol(target.kind)
    if protocol == "anthropic":
        return AnthropicBatchClient(target, http)
    if protocol == "openai":
        return OpenAIBatchClient(target, http)
    raise ValueError(f"kind {target.kind!r}: no batch-API client speaks protocol {protocol!r}")

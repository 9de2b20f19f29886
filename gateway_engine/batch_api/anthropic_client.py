"""The Anthropic Message Batches client (docs.anthropic.com/en/api/creating-message-batches and the
batch guide): ``POST {base_url}/messages/batches`` {"requests": [{custom_id, params}]}, ``GET
/messages/batches/{id}``, ``POST /messages/batches/{id}/cancel``, ``GET /messages/batches/{id}/results``
(JSONL, in any order), ``GET /messages/batches?limit=&after_id=`` (newest first); ``x-api-key`` and
``anthropic-version`` headers.

Anthropic batches carry no metadata: the caller's custom ids must be its own (``<chunk>-<n>``, matching
``^[a-zA-Z0-9_-]{1,64}$``, checked here before anything is sent) and crash adoption matches by creation
time and request count (``list_since``).

The results are always read from ``{base_url}/messages/batches/{id}/results`` — the ``results_url`` the
API reports, built from the configured base URL, so the key is never sent to a host an answer names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from ..http_batch import BatchHttp
from .base import BatchClientBase, compact, jsonl, need
from .errors import ANTHROPIC_ERROR_STATUS, invalid_answer
from .types import TERMINAL_STATES, BatchLine, BatchTarget, LineResult, RemoteBatch

CUSTOM_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PAGE_LIMIT = 100
ENVELOPE = (b'{"requests":[', b"]}")
OUTCOMES = ("succeeded", "errored", "canceled", "expired")


def _time(value: Any, what: str, key: str) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        raise invalid_answer(what, f"field {key!r} is not an RFC 3339 time") from None


class AnthropicBatchClient(BatchClientBase):
    """kind anthropic."""

    # the create body is {"requests":[<line>,<line>...]}: each encoded line carries its "," and the
    # envelope adds the rest (the last line's comma is dropped)
    envelope_bytes = len(ENVELOPE[0]) + len(ENVELOPE[1]) - 1

    def __init__(self, target: BatchTarget, http: BatchHttp | None = None):
        super().__init__(target, http)

    def headers(self) -> dict[str, str]:
        h = {"anthropic-version": self.target.anthropic_version}
        if self.target.api_key is not None:
            h["x-api-key"] = self.target.api_key
        return h

    def url(self, path: str, **query: str) -> str:
        base = self.target.base_url.rstrip("/")
        return f"{base}/messages/batches{path}" + (f"?{urlencode(query)}" if query else "")

    def encode_line(self, line: BatchLine) -> bytes:
        if line.endpoint != "chat":
            raise ValueError(
                f"endpoint: Anthropic's message batches take chat lines only, not {line.endpoint}"
            )
        if not CUSTOM_ID_RE.match(line.custom_id):
            raise ValueError(f"custom_id: {line.custom_id!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        return compact({"custom_id": line.custom_id, "params": line.body}) + b","

    async def create(self, chunk_id: str, lines: Sequence[BatchLine], window: str = "24h") -> RemoteBatch:
        if not lines:
            raise ValueError("lines: a provider batch needs at least one line")
        if window != "24h":
            raise ValueError(f"window: Anthropic message batches run within 24h, got {window!r}")
        joined = b"".join(self.encode_line(line) for line in lines)[:-1]
        body = ENVELOPE[0] + joined + ENVELOPE[1]
        return self.remote(await self.json_call("create message batch", "POST", self.url(""), body=body))

    async def get(self, remote_id: str) -> RemoteBatch:
        return self.remote(await self.json_call("get message batch", "GET", self.url(f"/{quote(remote_id)}")))

    async def cancel(self, remote_id: str) -> RemoteBatch:
        url = self.url(f"/{quote(remote_id)}/cancel")
        return self.remote(await self.json_call("cancel message batch", "POST", url))

    async def results(self, remote: RemoteBatch) -> list[LineResult]:
        what = "download message batch results"
        answer = await self.call(what, "GET", self.url(f"/{quote(remote.id)}/results"), download=True)
        return [line_result(row, what) for row in jsonl(answer.body, what)]

    async def list_since(self, created_after: float) -> list[RemoteBatch]:
        found: list[RemoteBatch] = []
        after: str | None = None
        while True:
            query = {"limit": str(PAGE_LIMIT), **({"after_id": after} if after else {})}
            page = await self.json_call("list message batches", "GET", self.url("", **query))
            data = page.get("data")
            if not isinstance(data, list):
                raise invalid_answer("list message batches", "field 'data' missing or not a list")
            batches = [self.remote(obj) for obj in data]
            found += [b for b in batches if b.created_at >= created_after]
            if not page.get("has_more") or not batches or batches[-1].created_at < created_after:
                return found
            after = batches[-1].id

    def remote(self, obj: Any) -> RemoteBatch:
        """A RemoteBatch from a ``message_batch`` object (state: in_progress, canceling; ended →
        cancelled when a cancel was initiated, expired when lines expired, otherwise ended)."""
        what = "message batch object"
        if not isinstance(obj, dict):
            raise invalid_answer(what, "not a JSON object")
        status = need(obj, "processing_status", str, what)
        raw_counts = obj.get("request_counts")
        counts: dict[str, Any] = raw_counts if isinstance(raw_counts, dict) else {}
        n = {k: int(counts.get(k) or 0) for k in ("processing", *OUTCOMES)}
        if status == "ended":
            state = "cancelled" if obj.get("cancel_initiated_at") else "expired" if n["expired"] else "ended"
        elif status in ("in_progress", "canceling"):
            state = status
        else:
            raise invalid_answer(what, f"unknown processing_status {status!r}")
        created = _time(need(obj, "created_at", str, what), what, "created_at")
        return RemoteBatch(
            id=need(obj, "id", str, what),
            state=state,
            raw_status=status,
            total=sum(n.values()),
            succeeded=n["succeeded"],
            errored=n["errored"],
            created_at=created or 0.0,
            expires_at=_time(obj.get("expires_at"), what, "expires_at"),
            ended=state in TERMINAL_STATES,
            results_url=obj.get("results_url") or None,
            canceled=n["canceled"],
            expired=n["expired"],
        )


def line_result(row: dict[str, Any], what: str) -> LineResult:
    """One results line ``{"custom_id", "result": {"type", ...}}`` as a LineResult."""
    custom_id = need(row, "custom_id", str, what)
    result = need(row, "result", dict, what)
    kind = result.get("type")
    if kind == "succeeded":
        return LineResult(custom_id, "succeeded", 200, need(result, "message", dict, what), None)
    if kind == "errored":
        raw = result.get("error")
        outer: dict[str, Any] = raw if isinstance(raw, dict) else {}
        nested = outer.get("error")
        inner: dict[str, Any] = nested if isinstance(nested, dict) else outer
        status = ANTHROPIC_ERROR_STATUS.get(str(inner.get("type")), 500)
        return LineResult(custom_id, "errored", status, None, inner)
    if kind == "canceled":
        return LineResult(custom_id, "canceled", None, None, None)
    if kind == "expired":
        return LineResult(custom_id, "expired", None, None, None)
    raise invalid_answer(what, f"unknown result type {kind!r} for {custom_id!r}")

"""The OpenAI Batch API and Azure OpenAI global batch client (the same protocol, different URLs, auth
and line format).

OpenAI (platform.openai.com/docs/api-reference/batch, /files): ``POST {base_url}/files`` (multipart
``file`` + ``purpose=batch``), ``POST {base_url}/batches`` {input_file_id, endpoint
"/v1/chat/completions", completion_window "24h", metadata}, ``GET /batches/{id}``, ``POST
/batches/{id}/cancel``, ``GET /batches?after=&limit=``, ``GET /files/{id}/content``; ``Authorization:
Bearer``. Azure (learn.microsoft.com azure/ai-services/openai/how-to/batch): the same under
``{base_url}/openai/…?api-version=…`` with the ``api-key`` header, endpoint and line url
"/chat/completions", and each line's ``model`` = the Global-Batch deployment.

Line format: ``{"custom_id", "method": "POST", "url", "body"}``; the output file's lines ``{"custom_id",
"response": {"status_code", "body"}, "error"}``; the error file's the same with a non-200 response or
``"response": null, "error": {"code": "batch_expired" | "batch_cancelled", "message"}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from ..http_batch import BatchHttp, multipart_body
from .base import BatchClientBase, compact, jsonl, need
from .errors import invalid_answer
from .types import TERMINAL_STATES, BatchLine, BatchTarget, LineResult, RemoteBatch

# OpenAI / Azure batch status -> the normalized state (gateway_engine.batch_api.types)
OPENAI_STATES = {
    "validating": "submitted",
    "in_progress": "in_progress",
    "finalizing": "finalizing",
    "completed": "ended",
    "cancelling": "canceling",
    "cancelled": "cancelled",
    "failed": "failed",
    "expired": "expired",
}
# a line's endpoint (BatchLine.endpoint) -> the url its batch and its lines name
OPENAI_PATHS = {"chat": "/v1/chat/completions", "embeddings": "/v1/embeddings"}
AZURE_PATHS = {"chat": "/chat/completions"}  # Azure's global batch serves chat deployments only
PAGE_LIMIT = 100
CHUNK_METADATA_KEY = "gateway_chunk"


class OpenAIBatchClient(BatchClientBase):
    """kind openai and azure_openai."""

    def __init__(self, target: BatchTarget, http: BatchHttp | None = None):
        super().__init__(target, http)
        self.azure = target.kind == "azure_openai"
        self.paths = AZURE_PATHS if self.azure else OPENAI_PATHS

    def path(self, endpoint: str) -> str:
        """The url lines of ``endpoint`` name; ValueError when the kind's batch API takes none."""
        if endpoint not in self.paths:
            raise ValueError(f"endpoint: {self.target.kind}'s batch API takes {', '.join(self.paths)} lines, "
                             f"not {endpoint}")  # fmt: skip
        return self.paths[endpoint]

    def headers(self) -> dict[str, str]:
        key = self.target.api_key
        if key is None:
            return {}
        return {"api-key": key} if self.azure else {"Authorization": f"Bearer {key}"}

    def url(self, path: str, **query: str) -> str:
        base = self.target.base_url.rstrip("/")
        if self.azure:
            query = {"api-version": self.target.api_version or "", **query}
            base = f"{base}/openai"
        return f"{base}{path}" + (f"?{urlencode(query)}" if query else "")

    def encode_line(self, line: BatchLine) -> bytes:
        body = {**line.body, "model": self.target.batch_deployment} if self.azure else line.body
        row = {"custom_id": line.custom_id, "method": "POST", "url": self.path(line.endpoint), "body": body}
        return compact(row) + b"\n"

    async def create(self, chunk_id: str, lines: Sequence[BatchLine], window: str = "24h") -> RemoteBatch:
        if not lines:
            raise ValueError("lines: a provider batch needs at least one line")
        endpoints = {line.endpoint for line in lines}
        if len(endpoints) > 1:
            raise ValueError(
                f"lines: one provider batch holds lines of one endpoint, got {sorted(endpoints)}"
            )
        endpoint = self.path(endpoints.pop())
        data = b"".join(self.encode_line(line) for line in lines)
        body, content_type = multipart_body({"purpose": "batch"}, "file", f"{chunk_id}.jsonl", data)
        uploaded = await self.json_call(
            "upload batch file", "POST", self.url("/files"), body=body, content_type=content_type
        )
        file_id = need(uploaded, "id", str, "upload batch file")
        payload = {"input_file_id": file_id, "endpoint": endpoint, "completion_window": window,
                   "metadata": {CHUNK_METADATA_KEY: chunk_id}}  # fmt: skip
        return self.remote(await self.json_call("create batch", "POST", self.url("/batches"), payload))

    async def get(self, remote_id: str) -> RemoteBatch:
        return self.remote(await self.json_call("get batch", "GET", self.url(f"/batches/{quote(remote_id)}")))

    async def cancel(self, remote_id: str) -> RemoteBatch:
        url = self.url(f"/batches/{quote(remote_id)}/cancel")
        return self.remote(await self.json_call("cancel batch", "POST", url))

    async def results(self, remote: RemoteBatch) -> list[LineResult]:
        out: list[LineResult] = []
        for file_id, what in ((remote.output_file_id, "output file"), (remote.error_file_id, "error file")):
            if file_id:
                url = self.url(f"/files/{quote(file_id)}/content")
                answer = await self.call(f"download {what}", "GET", url, download=True)
                out += [line_result(row, what) for row in jsonl(answer.body, f"download {what}")]
        return out

    async def list_since(self, created_after: float) -> list[RemoteBatch]:
        floor = math.floor(created_after)  # OpenAI's created_at is whole seconds
        found: list[RemoteBatch] = []
        after: str | None = None
        while True:
            query = {"limit": str(PAGE_LIMIT), **({"after": after} if after else {})}
            page = await self.json_call("list batches", "GET", self.url("/batches", **query))
            data = page.get("data")
            if not isinstance(data, list):
                raise invalid_answer("list batches", "field 'data' missing or not a list")
            batches = [self.remote(obj) for obj in data]
            found += [b for b in batches if b.created_at >= floor]
            if not page.get("has_more") or not batches or batches[-1].created_at < floor:
                return found
            after = batches[-1].id

    def remote(self, obj: Any) -> RemoteBatch:
        """A RemoteBatch from an OpenAI/Azure batch object."""
        what = "batch object"
        if not isinstance(obj, dict):
            raise invalid_answer(what, "not a JSON object")
        status = need(obj, "status", str, what)
        if status not in OPENAI_STATES:
            raise invalid_answer(what, f"unknown batch status {status!r}")
        state = OPENAI_STATES[status]
        counts = obj.get("request_counts") or {}
        errors = (obj.get("errors") or {}).get("data") if isinstance(obj.get("errors"), dict) else None
        expires = obj.get("expires_at")
        return RemoteBatch(
            id=need(obj, "id", str, what),
            state=state,
            raw_status=status,
            total=int(counts.get("total") or 0),
            succeeded=int(counts.get("completed") or 0),
            errored=int(counts.get("failed") or 0),
            created_at=float(need(obj, "created_at", int, what)),
            expires_at=float(expires) if isinstance(expires, int | float) else None,
            ended=state in TERMINAL_STATES,
            output_file_id=obj.get("output_file_id") or None,
            error_file_id=obj.get("error_file_id") or None,
            metadata=dict(obj.get("metadata") or {}),
            errors=list(errors or []),
        )


def line_result(row: dict[str, Any], what: str) -> LineResult:
    """One output / error file line as a LineResult."""
    custom_id = need(row, "custom_id", str, what)
    response = row.get("response") if isinstance(row.get("response"), dict) else None
    error = row.get("error") if isinstance(row.get("error"), dict) else None
    status = response.get("status_code") if response else None
    body = response.get("body") if response and isinstance(response.get("body"), dict) else None
    if status == 200 and body is not None and error is None:
        return LineResult(custom_id, "succeeded", 200, body, None)
    code = (error or {}).get("code")
    if code == "batch_expired":
        return LineResult(custom_id, "expired", None, None, error)
    if code == "batch_cancelled":
        return LineResult(custom_id, "canceled", None, None, error)
    detail = (body or {}).get("error") if isinstance((body or {}).get("error"), dict) else None
    return LineResult(
        custom_id, "errored", status if isinstance(status, int) else None, None, detail or error
    )

"""OpenAI's Batch API (files + batches) and Azure OpenAI's global batch, on the simulator.

Routes (``P`` = ``/{name}/v1`` for kind openai, ``/{name}/openai`` for kind azure_openai, where every
call needs ``?api-version=`` — missing: 400, unknown: Azure's 404 "Resource not found" — and the
``api-key`` header when the provider has a key; OpenAI: ``Authorization: Bearer``):

  POST   P/files                    multipart ``file`` + ``purpose`` (batch: a ``.jsonl`` file within
                                    ``batch_max_bytes``)
  GET    P/files/{id}               the file object
  GET    P/files/{id}/content       the file's bytes (inputs, outputs and error files)
  DELETE P/files/{id}
  POST   P/batches                  {input_file_id, endpoint, completion_window: "24h", metadata?}
  GET    P/batches                  ?after=&limit= (1-100, default 20), newest first
  GET    P/batches/{id}
  POST   P/batches/{id}/cancel

Shapes from the published references (platform.openai.com/docs/api-reference/batch, /files, the batch
guide's input/output line formats; learn.microsoft.com azure/ai-services/openai/how-to/batch). The
request checks of ``create`` are synchronous (400 naming the field); the file's lines are checked as the
API does during ``validating``: a JSON object per line with ``custom_id`` (unique), ``method: "POST"``,
``url`` = the batch's endpoint and a ``body`` the real-time route accepts (the same validation:
sim/kinds.py), one model per file (Azure: the Global-Batch deployment), at most ``batch_max_requests``
lines — any problem and the batch ends ``failed`` with ``errors.data`` [{code, message, param, line}].
Output lines: ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}``;
error-file lines: the same with a non-200 response, or ``"response": null, "error": {"code":
"batch_expired", "message"}`` for a line the window ended.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from sim.batch_files_openai import batch_object, read_lines
from sim.batch_store import BatchStore
from sim.wire_openai import azure_not_found, error_body

# OpenAI's Batch API also takes embeddings lines (platform.openai.com/docs/api-reference/batch/create:
# endpoint /v1/chat/completions, /v1/embeddings, /v1/completions, /v1/responses); Azure's global batch
# serves chat deployments only
OPENAI_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings")
AZURE_ENDPOINTS = ("/chat/completions", "/v1/chat/completions")
FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
BATCH_KEYS = {"input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after"}


def _json_error(status: int, message: str, param: str | None = None, code: str | None = None,
                type_: str = "invalid_request_error") -> web.Response:  # fmt: skip
    return web.json_response(error_body(message, type_, code, param), status=status)


class OpenAIBatchRoutes:
    """The files and batches endpoints of one kind (openai or azure_openai) over the stores."""

    def __init__(self, stores: dict[str, BatchStore], kind: str):
        self.stores = stores
        self.kind = kind
        self.azure = kind == "azure_openai"

    # --- plumbing -------------------------------------------------------------------------------
    def store(self, request: web.Request) -> BatchStore | web.Response:
        store = self.stores.get(request.match_info["name"])
        if store is None or store.cfg.kind != self.kind:
            return _json_error(404, f"No batch API at {request.path}.", code="not_found")
        store.counters["batch_api_calls"] += 1
        problem = self.preflight(store, request)
        if problem is not None:
            return problem
        return store

    def preflight(self, store: BatchStore, request: web.Request) -> web.Response | None:
        key = store.cfg.api_key
        if self.azure:
            version = request.query.get("api-version")
            if version is None:
                store.counters["batch_shape_rejections"] += 1
                return _json_error(400, "Missing required query parameter 'api-version'.", "api-version",
                                   "MissingApiVersionParameter")  # fmt: skip
            if version not in store.cfg.native.api_versions:
                store.counters["batch_shape_rejections"] += 1
                r = azure_not_found()
                return web.json_response(r.body, status=r.status)
            if key is not None and request.headers.get("api-key") != key:
                store.counters["batch_auth_rejections"] += 1
                return web.json_response({"error": {"code": "401", "message": "Access denied due to invalid "
                                          "subscription key or wrong API endpoint."}}, status=401)  # fmt: skip
        elif key is not None and request.headers.get("Authorization", "") != f"Bearer {key}":
            store.counters["batch_auth_rejections"] += 1
            return _json_error(401, "Incorrect API key provided.", code="invalid_api_key")
        return None

    def refuse(self, store: BatchStore, message: str, param: str | None = None, code: str | None = None,
               status: int = 400) -> web.Response:  # fmt: skip
        store.counters["batch_shape_rejections"] += 1
        return _json_error(status, message, param, code)

    @staticmethod
    def now() -> float:
        return asyncio.get_running_loop().time()

    # --- files ----------------------------------------------------------------------------------
    async def upload(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        if not request.content_type.startswith("multipart/form-data"):
            return self.refuse(store, "Expected a multipart/form-data body with 'file' and 'purpose'.")
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if not isinstance(purpose, str):
            return self.refuse(store, "Missing required parameter: 'purpose'.", "purpose",
                               "missing_required_parameter")  # fmt: skip
        if purpose not in FILE_PURPOSES:
            return self.refuse(
                store, f"Invalid value for 'purpose': '{purpose}'.", "purpose", "invalid_value"
            )
        if upload is None or isinstance(upload, str | bytes | bytearray):
            return self.refuse(
                store, "Missing required parameter: 'file'.", "file", "missing_required_parameter"
            )
        data = upload.file.read()
        filename = upload.filename or "upload"
        if purpose == "batch":
            if not filename.endswith(".jsonl"):
                return self.refuse(store, "Invalid file format for Batch API. Must be .jsonl", "file")
            if len(data) > store.bc.max_bytes:
                return self.refuse(store, f"File is too large: {len(data)} bytes, the limit for purpose "
                                   f"'batch' is {store.bc.max_bytes} bytes.", "file", "file_too_large")  # fmt: skip
        return web.json_response(store.add_file(filename, purpose, data).info())

    def file_of(self, store: BatchStore, request: web.Request):
        f = store.files.get(request.match_info["file_id"])
        if f is None:
            return _json_error(404, f"No such File object: {request.match_info['file_id']}", "id")
        return f

    async def file_info(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        f = self.file_of(store, request)
        return f if isinstance(f, web.Response) else web.json_response(f.info())

    async def file_content(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        f = self.file_of(store, request)
        if isinstance(f, web.Response):
            return f
        if f.purpose == "batch_output":
            store.counters["batch_results_downloads"] += 1
            delay = store.seconds(store.bc.download_delay_ms)
            if delay > 0:
                await asyncio.sleep(delay)
        return web.Response(body=f.data, content_type="application/octet-stream")

    async def file_delete(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        f = self.file_of(store, request)
        if isinstance(f, web.Response):
            return f
        del store.files[f.id]
        return web.json_response({"id": f.id, "object": "file", "deleted": True})

    # --- batches --------------------------------------------------------------------------------
    def create_problem(self, store: BatchStore, body: Any) -> web.Response | None:
        if not isinstance(body, dict):
            return self.refuse(store, "We could not parse the JSON body of your request.")
        for key in sorted(set(body) - BATCH_KEYS):
            return self.refuse(store, f"Unrecognized request argument supplied: {key}", key)
        for key in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(body.get(key), str):
                return self.refuse(
                    store, f"Missing required parameter: '{key}'.", key, "missing_required_parameter"
                )
        endpoints = AZURE_ENDPOINTS if self.azure else OPENAI_ENDPOINTS
        if body["endpoint"] not in endpoints:
            return self.refuse(store, f"Invalid value for 'endpoint': '{body['endpoint']}'; the simulator serves "
                               f"{' and '.join(endpoints)}.", "endpoint", "invalid_value")  # fmt: skip
        if body["completion_window"] != "24h":
            return self.refuse(store, f"Invalid value for 'completion_window': '{body['completion_window']}'. "
                               f"Supported values are: '24h'.", "completion_window", "invalid_value")  # fmt: skip
        return _metadata_problem(self, store, body.get("metadata"))

    async def create(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            body = None
        problem = self.create_problem(store, body)
        if problem is not None:
            return problem
        f = store.files.get(body["input_file_id"])
        if f is None:
            return self.refuse(store, f"No such File object: {body['input_file_id']}", "input_file_id",
                               status=404)  # fmt: skip
        if f.purpose != "batch":
            return self.refuse(store, f"File {f.id} has purpose '{f.purpose}'; a batch needs purpose 'batch'.",
                               "input_file_id")  # fmt: skip
        lines, errors = read_lines(store, f.data, body["endpoint"], self.azure)
        batch = store.create(self.now(), "batch_", lines, endpoint=body["endpoint"], input_file_id=f.id,
                             metadata=body.get("metadata"), errors=errors)  # fmt: skip
        delay = store.seconds(store.bc.create_delay_ms)
        if delay > 0:
            await asyncio.sleep(delay)  # stored already: a caller killed now left a batch behind
        return web.json_response(batch_object(store, batch, self.now()))

    def load(self, request: web.Request):
        store = self.store(request)
        if isinstance(store, web.Response):
            return store, None
        batch = store.batches.get(request.match_info["batch_id"])
        if batch is None:
            return store, _json_error(
                404, f"No batch found with id '{request.match_info['batch_id']}'.", "batch_id"
            )
        return store, batch

    async def retrieve(self, request: web.Request) -> web.Response:
        store, batch = self.load(request)
        if isinstance(store, web.Response):
            return store
        if isinstance(batch, web.Response):
            return batch
        return web.json_response(batch_object(store, batch, self.now()))

    async def cancel(self, request: web.Request) -> web.Response:
        store, batch = self.load(request)
        if isinstance(store, web.Response):
            return store
        if isinstance(batch, web.Response):
            return batch
        now = self.now()
        if batch.ended(now) and batch.openai_status(now) != "cancelled":
            return self.refuse(store, f"Cannot cancel a batch with status '{batch.openai_status(now)}'.",
                               status=409)  # fmt: skip
        store.cancel(batch, now)
        return web.json_response(batch_object(store, batch, self.now()))

    async def listing(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        try:
            limit = int(request.query.get("limit", "20"))
            assert 1 <= limit <= 100
        except (ValueError, AssertionError):
            return self.refuse(store, "Invalid 'limit': expected an integer between 1 and 100.", "limit")
        batches = store.newest_first()
        after = request.query.get("after")
        if after is not None:
            ids = [b.id for b in batches]
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        page = batches[:limit]
        data = [batch_object(store, b, self.now()) for b in page]
        return web.json_response({"object": "list", "data": data, "first_id": page[0].id if page else None,
                                  "last_id": page[-1].id if page else None,
                                  "has_more": len(batches) > limit})  # fmt: skip


def _metadata_problem(routes: OpenAIBatchRoutes, store: BatchStore, metadata: Any) -> web.Response | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        return routes.refuse(
            store, "Invalid type for 'metadata': expected an object.", "metadata", "invalid_type"
        )
    if len(metadata) > 16:
        return routes.refuse(store, "Invalid 'metadata': too many properties. Expected an object with at most 16 "
                             f"properties, but got {len(metadata)} instead.", "metadata")  # fmt: skip
    for key, value in metadata.items():
        if len(key) > 64:
            return routes.refuse(store, f"Invalid 'metadata': key '{key[:20]}…' longer than 64 characters.",
                                 "metadata")  # fmt: skip
        if not isinstance(value, str) or len(value) > 512:
            return routes.refuse(store, f"Invalid 'metadata.{key}': expected a string of at most 512 characters.",
                                 f"metadata.{key}")  # fmt: skip
    return None


def register(app: web.Application, stores: dict[str, BatchStore]) -> None:
    """Add the OpenAI (``/{name}/v1``) and Azure (``/{name}/openai``) files and batches routes."""
    for kind, prefix in (("openai", "/{name}/v1"), ("azure_openai", "/{name}/openai")):
        r = OpenAIBatchRoutes(stores, kind)
        app.router.add_post(f"{prefix}/files", r.upload)
        app.router.add_get(f"{prefix}/files/{{file_id}}", r.file_info)
        app.router.add_get(f"{prefix}/files/{{file_id}}/content", r.file_content)
        app.router.add_delete(f"{prefix}/files/{{file_id}}", r.file_delete)
        app.router.add_post(f"{prefix}/batches", r.create)
        app.router.add_get(f"{prefix}/batches", r.listing)
        app.router.add_get(f"{prefix}/batches/{{batch_id}}", r.retrieve)
        app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", r.cancel)

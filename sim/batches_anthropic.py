"""Anthropic's Message Batches API on the simulator (kind anthropic; ``anthropic-version`` and, when the
provider has a key, ``x-api-key`` required as on the Messages route).

  POST /{name}/v1/messages/batches               {"requests": [{"custom_id", "params"}, ...]}
  GET  /{name}/v1/messages/batches               ?limit= (1-1000, default 20) &after_id= &before_id=,
                                                 newest first
  GET  /{name}/v1/messages/batches/{id}
  POST /{name}/v1/messages/batches/{id}/cancel
  GET  /{name}/v1/messages/batches/{id}/results  JSONL, in no particular order (shuffled), once ended

Shapes from the published reference (docs.anthropic.com/en/api/creating-message-batches, retrieving-,
listing-, canceling-message-batches, retrieving-message-batch-results and the batch guide): the batch
object ``{"id": "msgbatch_…", "type": "message_batch", "processing_status": "in_progress" | "canceling" |
"ended", "request_counts": {processing, succeeded, errored, canceled, expired}, "ended_at", "created_at",
"expires_at", "archived_at", "cancel_initiated_at", "results_url"}`` (RFC 3339 times); result lines
``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error": {"type":
"error", "error": {"type", "message"}}} | {"type": "canceled"} | {"type": "expired"}}``.
The request's shape is checked at once (400: ``requests`` a non-empty list of at most
``batch_max_requests`` objects with exactly ``custom_id`` — ``^[a-zA-Z0-9_-]{1,64}$``, unique — and
``params``; a body over ``batch_max_bytes``: 413); each line's ``params`` are checked as the Messages
route checks a body (sim/wire_anthropic.py) but, as the API does, asynchronously: a refused line ends
``errored`` with an ``invalid_request_error``.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from sim.batch_store import BatchStore, SimBatch
from sim.wire_anthropic import check_headers, error

CUSTOM_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    d = datetime.fromtimestamp(t, UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + f".{d.microsecond:06d}Z"


class AnthropicBatchRoutes:
    def __init__(self, stores: dict[str, BatchStore]):
        self.stores = stores

    def store(self, request: web.Request) -> BatchStore | web.Response:
        store = self.stores.get(request.match_info["name"])
        if store is None or store.cfg.kind != "anthropic":
            r = error(404, "not_found_error", f"No batch API at {request.path}.")
            return web.json_response(r.body, status=404)
        store.counters["batch_api_calls"] += 1
        problem = check_headers(request.headers, store.cfg.api_key)
        if problem is not None:
            key = "batch_auth_rejections" if problem.rejected == "auth" else "batch_shape_rejections"
            store.counters[key] += 1
            return web.json_response(problem.body, status=problem.status)
        return store

    def refuse(self, store: BatchStore, message: str, status: int = 400,
               type_: str = "invalid_request_error") -> web.Response:  # fmt: skip
        store.counters["batch_shape_rejections"] += 1
        return web.json_response(error(status, type_, message).body, status=status)

    @staticmethod
    def now() -> float:
        return asyncio.get_running_loop().time()

    def problem(self, store: BatchStore, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "Input should be a valid dictionary or object to extract fields from"
        for key in sorted(set(body) - {"requests"}):
            return f"{key}: Extra inputs are not permitted"
        requests = body.get("requests")
        if requests is None:
            return "requests: Field required"
        if not isinstance(requests, list):
            return "requests: Input should be a valid list"
        if not requests:
            return "requests: List should have at least 1 item after validation, not 0"
        if len(requests) > store.bc.max_requests:
            return f"requests: List should have at most {store.bc.max_requests} items after validation, not " \
                   f"{len(requests)}"  # fmt: skip
        seen: set[str] = set()
        for i, r in enumerate(requests):
            if not isinstance(r, dict):
                return f"requests.{i}: Input should be a valid dictionary or object to extract fields from"
            for key in sorted(set(r) - {"custom_id", "params"}):
                return f"requests.{i}.{key}: Extra inputs are not permitted"
            for key in ("custom_id", "params"):
                if key not in r:
                    return f"requests.{i}.{key}: Field required"
            cid = r["custom_id"]
            if not isinstance(cid, str):
                return f"requests.{i}.custom_id: Input should be a valid string"
            if not CUSTOM_ID_RE.match(cid):
                return f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            if cid in seen:
                return f"requests: custom_id values must be unique (duplicate: {cid!r})"
            seen.add(cid)
            if not isinstance(r["params"], dict):
                return f"requests.{i}.params: Input should be a valid dictionary or object to extract fields from"
        return None

    async def create(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        raw = await request.read()
        if len(raw) > store.bc.max_bytes:
            return self.refuse(store, f"Request exceeds the maximum size of {store.bc.max_bytes} bytes", 413,
                               "request_too_large")  # fmt: skip
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self.refuse(store, "There was an error parsing the body of your request: not valid JSON")
        problem = self.problem(store, body)
        if problem is not None:
            return self.refuse(store, problem)
        version = request.headers.get("anthropic-version", "")
        lines = []
        for r in body["requests"]:
            params = r["params"]
            invalid = "stream: batch requests cannot stream" if params.get("stream") is True else None
            reply = store.kind.validate(params, _Headers(version))
            if reply is not None:
                invalid = reply.body["error"]["message"]
            lines.append((r["custom_id"], params, invalid))
        batch = store.create(self.now(), "msgbatch_sim", lines)
        delay = store.seconds(store.bc.create_delay_ms)
        if delay > 0:
            await asyncio.sleep(delay)  # stored already: a caller killed now left a batch behind
        return web.json_response(self.batch_object(store, batch, request))

    def load(self, request: web.Request):
        store = self.store(request)
        if isinstance(store, web.Response):
            return store, None
        batch = store.batches.get(request.match_info["batch_id"])
        if batch is None:
            r = error(404, "not_found_error", f"Message batch {request.match_info['batch_id']!r} not found.")
            return store, web.json_response(r.body, status=404)
        return store, batch

    async def retrieve(self, request: web.Request) -> web.Response:
        store, batch = self.load(request)
        if isinstance(store, web.Response) or isinstance(batch, web.Response):
            return store if isinstance(store, web.Response) else batch
        return web.json_response(self.batch_object(store, batch, request))

    async def cancel(self, request: web.Request) -> web.Response:
        store, batch = self.load(request)
        if isinstance(store, web.Response) or isinstance(batch, web.Response):
            return store if isinstance(store, web.Response) else batch
        store.cancel(batch, self.now())
        return web.json_response(self.batch_object(store, batch, request))

    async def results(self, request: web.Request) -> web.Response:
        store, batch = self.load(request)
        if isinstance(store, web.Response) or isinstance(batch, web.Response):
            return store if isinstance(store, web.Response) else batch
        store.settle(batch, self.now())
        if not batch.settled:
            return self.refuse(store, f"Message batch {batch.id} has not ended yet; results are available once "
                               f"its processing_status is ended.")  # fmt: skip
        store.counters["batch_results_downloads"] += 1
        delay = store.seconds(store.bc.download_delay_ms)
        if delay > 0:
            await asyncio.sleep(delay)
        rows = [json.dumps({"custom_id": ln.custom_id, "result": _result(ln)}, separators=(",", ":"))
                for ln in batch.lines]  # fmt: skip
        rows = _out_of_order(rows, random.Random(f"{store.seed}:{batch.id}:order"))
        return web.Response(body=("\n".join(rows) + "\n").encode(), content_type="application/binary")

    async def listing(self, request: web.Request) -> web.Response:
        store = self.store(request)
        if isinstance(store, web.Response):
            return store
        try:
            limit = int(request.query.get("limit", "20"))
            assert 1 <= limit <= 1000
        except (ValueError, AssertionError):
            return self.refuse(store, "limit: Input should be an integer between 1 and 1000")
        batches = store.newest_first()
        ids = [b.id for b in batches]
        after, before = request.query.get("after_id"), request.query.get("before_id")
        if after is not None:
            batches = batches[ids.index(after) + 1 :] if after in ids else []
            page = batches[:limit]
            more = len(batches) > limit
        elif before is not None:
            batches = batches[: ids.index(before)] if before in ids else []
            page = batches[-limit:]
            more = len(batches) > limit
        else:
            page, more = batches[:limit], len(batches) > limit
        data = [self.batch_object(store, b, request) for b in page]
        return web.json_response({"data": data, "has_more": more, "first_id": page[0].id if page else None,
                                  "last_id": page[-1].id if page else None})  # fmt: skip

    def batch_object(self, store: BatchStore, batch: SimBatch, request: web.Request) -> dict[str, Any]:
        now = self.now()
        store.settle(batch, now)
        end_at, _, _ = batch.end()
        ended = batch.settled
        status = "ended" if ended else "canceling" if batch.cancel_t is not None else "in_progress"
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for ln in batch.lines:
                counts[ln.outcome or "errored"] += 1
        else:
            done = batch.done_lines(now)
            counts["errored"] = sum(1 for ln in done if ln.fails or ln.invalid)
            counts["succeeded"] = len(done) - counts["errored"]
            counts["processing"] = len(batch.lines) - len(done)
        base = f"{request.scheme}://{request.host}/{store.cfg.name}/v1/messages/batches/{batch.id}"
        return {
            "id": batch.id, "type": "message_batch", "processing_status": status, "request_counts": counts,
            "ended_at": _iso(batch.wall(end_at)) if ended else None, "created_at": _iso(batch.created_at),
            "expires_at": _iso(batch.created_at + batch.window_s), "archived_at": None,
            "cancel_initiated_at": _iso(batch.cancel_wall), "results_url": f"{base}/results" if ended else None,
        }  # fmt: skip


def _result(line) -> dict[str, Any]:
    if line.outcome == "succeeded":
        return {"type": "succeeded", "message": line.answer}
    if line.outcome == "errored":
        if line.invalid is not None:
            err = {"type": "invalid_request_error", "message": line.invalid}
        else:
            err = {"type": "api_error", "message": "Internal server error"}
        return {"type": "errored", "error": {"type": "error", "error": err}}
    return {"type": line.outcome or "errored"}


class _Headers:
    """What the kind adapter's ``validate`` reads of a request: the anthropic-version header."""

    query: dict[str, str] = {}
    match_info: dict[str, str] = {}

    def __init__(self, version: str):
        self.headers = {"anthropic-version": version}


def register(app: web.Application, stores: dict[str, BatchStore]) -> None:
    r = AnthropicBatchRoutes(stores)
    app.router.add_post("/{name}/v1/messages/batches", r.create)
    app.router.add_get("/{name}/v1/messages/batches", r.listing)
    app.router.add_get("/{name}/v1/messages/batches/{batch_id}", r.retrieve)
    app.router.add_post("/{name}/v1/messages/batches/{batch_id}/cancel", r.cancel)
    app.router.add_get("/{name}/v1/messages/batches/{batch_id}/results", r.results)


def _out_of_order(rows: list[str], rng: random.Random) -> list[str]:
    """The rows shuffled, never in submission order when there are two or more: the API warns that results
    come in no particular order, and a client that happens to see them in order must still be caught."""
    shuffled = list(rows)
    rng.shuffle(shuffled)
    if len(shuffled) > 1 and shuffled == rows:
        shuffled = shuffled[1:] + shuffled[:1]
    return shuffled

"""The OpenAI / Azure batch API's file checks and batch objects (sim/batches_openai.py serves them).

``read_lines`` checks an input file's lines as the API does while a batch is ``validating`` (problems
become the batch's ``errors.data``); ``batch_object`` renders a batch as the API reports it and, once it
has ended, writes its output and error files (``write_files``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sim.batch_store import NO_REQUEST, BatchStore, SimBatch
from sim.wire_embeddings import validate_openai
from sim.wire_openai import error_body

LINE_KEYS = {"custom_id", "method", "url", "body"}
MAX_ERRORS = 20


def read_lines(store: BatchStore, data: bytes, endpoint: str, azure: bool):
    """(lines [(custom_id, body, None)], errors) of an input file, checked as ``validating`` does."""
    lines: list[tuple[str, dict[str, Any], str | None]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()

    def err(code: str, message: str, line: int, param: str | None = None) -> None:
        if len(errors) < MAX_ERRORS:
            errors.append({"code": code, "message": message, "param": param, "line": line})

    raw_lines = [ln for ln in data.split(b"\n") if ln.strip()]
    if not raw_lines:
        err("empty_file", "The input file is empty.", 1)
    if len(raw_lines) > store.bc.max_requests:
        err("too_many_requests", f"The input file has {len(raw_lines)} requests; the limit is "
            f"{store.bc.max_requests}.", len(raw_lines))  # fmt: skip
    for n, raw in enumerate(raw_lines, start=1):
        try:
            line = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            err("invalid_json_line", "This line is not parseable as valid JSON.", n)
            continue
        problem = line_problem(store, line, endpoint, seen, models, azure)
        if problem is not None:
            err(problem[0], problem[1], n, problem[2])
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            seen.add(line["custom_id"])
            lines.append((line["custom_id"], line.get("body") or {}, None))
    return lines, errors


def line_problem(store: BatchStore, line: Any, endpoint: str, seen: set[str], models: set[str],
                 azure: bool) -> tuple[str, str, str | None] | None:  # fmt: skip
    if not isinstance(line, dict):
        return "invalid_request", "Each line must be a JSON object.", None
    for key in sorted(set(line) - LINE_KEYS):
        return "invalid_request", f"Unrecognized argument on the line: '{key}'.", key
    for key in sorted(LINE_KEYS - set(line)):
        return "missing_required_parameter", f"Missing required parameter: '{key}'.", key
    if not isinstance(line["custom_id"], str) or not line["custom_id"]:
        return "invalid_request", "'custom_id' must be a non-empty string.", "custom_id"
    if line["custom_id"] in seen:
        return "duplicate_custom_id", f"The custom_id '{line['custom_id']}' is not unique.", "custom_id"
    if line["method"] != "POST":
        return "invalid_request", f"Invalid method '{line['method']}': only POST is supported.", "method"
    if line["url"] != endpoint:
        return (
            "invalid_url",
            f"The url '{line['url']}' does not match the batch's endpoint '{endpoint}'.",
            "url",
        )
    body = line["body"]
    if not isinstance(body, dict):
        return "invalid_request", "'body' must be a JSON object.", "body"
    if body.get("stream") is True:
        return "invalid_request", "Streaming is not supported in the Batch API.", "body.stream"
    model = body.get("model")
    if endpoint.endswith("/embeddings"):  # the embeddings route's own checks (sim/wire_embeddings.py)
        reply = validate_openai(body, model if isinstance(model, str) else "", azure=azure)
    else:
        reply = store.kind.validate(body, NO_REQUEST)
    if reply is not None:
        return "invalid_request", reply.body["error"]["message"], "body"
    if not isinstance(model, str) or not model:
        return "missing_required_parameter", "Missing required parameter: 'body.model'.", "body.model"
    if azure and model != store.bc.deployment:
        return "model_not_found", (f"The model '{model}' is not a Global-Batch deployment of this resource "
                                   f"(expected '{store.bc.deployment}')."), "body.model"  # fmt: skip
    models.add(model)
    if len(models) > 1:
        return "mismatched_model", "All requests in the input file must use the same model.", "body.model"
    return None


def batch_object(store: BatchStore, batch: SimBatch, now: float) -> dict[str, Any]:
    """The OpenAI ``batch`` object of ``batch`` at ``now`` (its files written once it has ended)."""
    store.settle(batch, now)
    if batch.settled:
        write_files(store, batch)
    status = batch.openai_status(now)
    rel = now - batch.t0
    end_at, final, _ = batch.end()
    T = batch.turnaround_s

    def at(offset: float | None) -> int | None:
        return int(batch.wall(offset)) if offset is not None and rel >= offset else None

    done = [] if batch.errors else batch.done_lines(now)
    failed = sum(1 for ln in done if ln.fails) + (
        sum(1 for ln in batch.lines if ln.outcome == "expired") if batch.settled else 0
    )  # fmt: skip
    cancel_rel = None if batch.cancel_t is None else batch.cancel_t - batch.t0
    return {
        "id": batch.id, "object": "batch", "endpoint": batch.endpoint,
        "errors": {"object": "list", "data": batch.errors} if batch.errors and status == "failed" else None,
        "input_file_id": batch.input_file_id, "completion_window": "24h", "status": status,
        "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
        "created_at": int(batch.created_at), "in_progress_at": None if batch.errors else at(0.1 * T),
        "expires_at": int(batch.created_at + batch.window_s),
        "finalizing_at": at(0.9 * T) if final == "completed" else None,
        "completed_at": at(end_at) if final == "completed" else None,
        "failed_at": at(end_at) if final == "failed" else None,
        "expired_at": at(end_at) if final == "expired" else None,
        "cancelling_at": at(cancel_rel), "cancelled_at": at(end_at) if final == "cancelled" else None,
        "request_counts": {"total": len(batch.lines), "completed": len(done) - sum(1 for ln in done if ln.fails),
                           "failed": failed},
        "metadata": batch.metadata,
    }  # fmt: skip


def write_files(store: BatchStore, batch: SimBatch) -> None:
    """The output and error files of a settled batch (once)."""
    if batch.output_file_id or batch.error_file_id or batch.errors:
        return
    out, errs = [], []
    for line in batch.lines:
        rid = f"batch_req_{uuid.uuid4().hex[:24]}"
        if line.outcome == "succeeded":
            response = {
                "status_code": 200,
                "request_id": f"req_{uuid.uuid4().hex[:24]}",
                "body": line.answer,
            }
            out.append({"id": rid, "custom_id": line.custom_id, "response": response, "error": None})
        elif line.outcome == "errored":
            body = error_body("The server had an error processing your request. Sorry about that!",
                              "server_error")  # fmt: skip
            response = {"status_code": 500, "request_id": f"req_{uuid.uuid4().hex[:24]}", "body": body}
            errs.append({"id": rid, "custom_id": line.custom_id, "response": response, "error": None})
        elif line.outcome == "expired":
            error = {
                "code": "batch_expired",
                "message": "This request could not be executed before the completion window expired.",
            }
            errs.append({"id": rid, "custom_id": line.custom_id, "response": None, "error": error})
    if out:
        batch.output_file_id = store.add_file(f"{batch.id}_output.jsonl", "batch_output", _jsonl(out)).id
    if errs:
        batch.error_file_id = store.add_file(f"{batch.id}_error.jsonl", "batch_output", _jsonl(errs)).id


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)

"""OpenAI Batch JSONL ⇄ native ITEMs and RESULTs. Pure functions: no ORM, no HTTP.

Input line  {"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": {"model", "messages", …}}
→ native ITEM {"custom_id", "route" | "provider": body.model, "messages", "params": rest of body}.
A ``/v1/responses`` line's body is a Responses request, read as the interactive lane reads one
(interactive/surfaces/responses_request.py) into the same chat ITEM; its output line's ``response.body``
is a Response object (``responses.from_chat``). A ``/v1/embeddings`` line's body {"model", "input", …}
is an embeddings ITEM ({…, "endpoint": "embeddings", "input", "params"}); its output line's
``response.body`` the embeddings answer. Each endpoint's reader and writer: line_bodies.py.

RESULT (docs/contract.md §4) → output line {"id", "custom_id", "response": {"status_code": 200, "request_id",
"body"}, "error": null} or error line (HTTP failures keep `response` with the status code and an
`{"error": {"message", "type", "param", "code"}}` body; everything else has `response: null, error: {code,
message}`). Codes and OpenAI types come from gateway_engine.error_kinds, the table the interactive lane
reads too (an item without an error type of its own: its status's, ``error_type_of_status``).
"""

from __future__ import annotations

import codecs
import difflib
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from gateway_engine.error_kinds import error_kind, error_type_of_status
from gateway_engine.errors import ApplicationError

from .line_bodies import CHAT_COMPLETIONS, EMBEDDINGS, RESPONSES, line_body

ENDPOINTS = (CHAT_COMPLETIONS, EMBEDDINGS, RESPONSES)
LINE_FIELDS = frozenset({"custom_id", "method", "url", "body"})
MAX_LINE_ERRORS = 100
UTF8_BOM = b"\xef\xbb\xbf"  # dropped at the start of a line (editors on Windows write one)
HINT_SEPARATOR = " — "  # batches.submission's: what follows it in a native error is a hint


@dataclass(frozen=True)
class LineError:
    """One problem in an input file. `line` is 1-based (None for file-level problems)."""

    code: str
    message: str
    param: str | None = None
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "param": self.param, "line": self.line}


class InputFileError(ApplicationError):
    """400: problems of an input file's lines (``errors``, sorted by line, at most MAX_LINE_ERRORS)."""

    code = "invalid_input_file"

    def __init__(self, errors: list[LineError]):
        self.errors = sorted(errors, key=lambda e: (e.line is None, e.line or 0))[:MAX_LINE_ERRORS]
        super().__init__("; ".join(f"line {e.line}: {e.message}" for e in self.errors[:5]))


@dataclass
class ParsedFile:
    items: list[dict[str, Any]]
    sizes: list[int]  # raw bytes of each line
    lines: list[int]  # 1-based line number of each item
    errors: list[LineError] = field(default_factory=list)  # problems found before native validation
    bad: set[int] = field(default_factory=set)  # indexes of items with such problems
    model_names: list[str] = field(default_factory=list)  # every route and provider, for "did you mean"

    def good(self) -> tuple[list[dict[str, Any]], list[int], list[int]]:
        """(items, sizes, line numbers) of the lines without problems of their own."""
        keep = [i for i in range(len(self.items)) if i not in self.bad]
        return [self.items[i] for i in keep], [self.sizes[i] for i in keep], [self.lines[i] for i in keep]


def read_input(
    stream: IO[bytes],
    *,
    endpoint: str,
    max_items: int,
    max_item_bytes: int,
    routes: Iterable[str],
    providers: Iterable[str],
) -> ParsedFile:
    """Read an OpenAI batch input file line by line into native ITEMs. Problems of a line (JSON, url,
    method, body) are collected in `errors`; the native validator checks the other lines afterwards.
    Raises InputFileError for file-level problems (no lines, too many lines)."""
    routes, providers = frozenset(routes), frozenset(providers)
    parsed = ParsedFile(items=[], sizes=[], lines=[], model_names=sorted(routes | providers))
    for lineno, raw in enumerate(stream, start=1):
        if raw.startswith(UTF8_BOM):  # the file's, or a concatenated file's (as the native JSONL path)
            raw = raw[len(UTF8_BOM) :]
        if not raw.strip():
            continue
        if len(parsed.items) >= max_items:
            raise InputFileError(
                [LineError("too_many_requests", f"the file has more than {max_items} requests", None, lineno)]
            )
        size = len(raw.rstrip(b"\r\n"))
        index = len(parsed.items)
        parsed.sizes.append(size)
        parsed.lines.append(lineno)
        if size > max_item_bytes:
            line_errors = [
                LineError("line_too_large", f"line is {size} bytes; at most {max_item_bytes}", None, lineno)
            ]
            item: dict[str, Any] = {}
        else:
            item, line_errors = native_item(
                raw, lineno, endpoint=endpoint, routes=routes, providers=providers
            )
        if line_errors:
            parsed.errors.extend(line_errors)
            parsed.bad.add(index)
        parsed.items.append(item)
    if not parsed.items:
        raise InputFileError([LineError("empty_file", "the input file contains no requests")])
    return parsed


FORMAT_CHUNK = 1024 * 1024
_LEADING_BLANKS = " \t\r\x0b\x0c"  # what bytes.strip() also drops (a line of only these is blank)
# a line start (after a newline) whose first character past an optional BOM and blanks is neither "{"
# nor the line's end: not JSONL. Possessive, so a BOM or blanks are never given back: linear time.
_NOT_AN_OBJECT = re.compile("\n\ufeff?+[ \t\r\x0b\x0c]*+(?=[^{ \t\r\x0b\x0c\n])")
JSONL_HINT = "a batch input file is JSONL: UTF-8 text, one JSON object (one request) per line"


def jsonl_format_problem(stream: IO[bytes], chunk_size: int = FORMAT_CHUNK) -> str | None:
    """Why `stream` is not a JSONL file at all (None if it is one): it must be UTF-8 and every non-blank
    line must start a JSON object (``{``, after blanks and a UTF-8 BOM, which ``read_input`` drops too),
    with at least one such line. Line numbers count ``\n`` as ``read_input`` does. Only the format is
    checked: a line that starts an object but is not valid JSON, or not a valid request, is reported
    with every other such line when a batch is created from the file, as on OpenAI. One pass in chunks,
    memory bounded by `chunk_size` whatever the lines; the lines are scanned by a regex, so Python code
    runs per chunk, not per line."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1  # the line the current chunk starts in
    head: str | None = ""  # the current line's beginning while only blanks were seen; None once judged
    seen_request = False

    def refusal(number: int, body: str) -> str:
        body = body.split("\n", 1)[0].rstrip("\r")
        shown = body[:24] + ("…" if len(body) > 24 else "")
        return f"line {number} does not start a JSON object (it starts with {shown!r}); {JSONL_HINT}"

    def judge(raw: str) -> tuple[str, str | None]:
        """(what the line starts with past a BOM and blanks, the head to keep if that is nothing)"""
        body = (raw[1:] if raw.startswith("\ufeff") else raw).lstrip(_LEADING_BLANKS)
        return body, (None if body else raw[:2])  # a BOM and one blank are all a head needs

    while True:
        chunk = stream.read(chunk_size)
        final = not chunk
        pending = decoder.getstate()[0]  # the bytes of a character the previous chunk ended inside
        try:
            text = decoder.decode(chunk, final=final)
        except UnicodeDecodeError as exc:
            bad = (pending + chunk)[exc.start : exc.start + 1].hex()
            at_line = line + chunk.count(b"\n", 0, max(0, exc.start - len(pending)))
            return f"line {at_line} is not UTF-8 text (byte 0x{bad}); {JSONL_HINT}"
        first_newline = text.find("\n")
        if head is not None:  # the line going on from the previous chunk
            body, head = judge(head + (text if first_newline < 0 else text[:first_newline]))
            if body and body[0] != "{":
                return refusal(line, body)
            seen_request = seen_request or bool(body)
        if first_newline >= 0:
            found = _NOT_AN_OBJECT.search(text)
            if found is not None:
                return refusal(
                    line + text.count("\n", 0, found.start()) + 1, text[found.end() : found.end() + 25]
                )
            seen_request = seen_request or text.find("{", first_newline) >= 0
            # the chunk's last line, to go on in the next chunk: judged, or blanks so far
            body, head = judge(text[text.rfind("\n") + 1 :])
            line += text.count("\n")
        if final:
            break
    if not seen_request:
        return f"the file holds only blank lines; {JSONL_HINT}"
    return None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a valid JSON value")


def native_item(
    raw: bytes, lineno: int, *, endpoint: str, routes: frozenset[str], providers: frozenset[str]
) -> tuple[dict[str, Any], list[LineError]]:
    """One input line → (native ITEM, problems found before native validation)."""
    try:
        obj = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return {}, [LineError("invalid_json_line", "line is not valid UTF-8", None, lineno)]
    except (ValueError, RecursionError) as exc:
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return {}, [LineError("invalid_json_line", f"line is not valid JSON: {problem}", None, lineno)]
    if not isinstance(obj, dict):
        return {}, [LineError("invalid_json_line", "line must be a JSON object", None, lineno)]
    errors = [
        LineError("invalid_request", f"unknown field; allowed: {', '.join(sorted(LINE_FIELDS))}", key, lineno)
        for key in obj
        if key not in LINE_FIELDS
    ]
    if obj.get("method") != "POST":
        errors.append(LineError("invalid_method", "method must be 'POST'", "method", lineno))
    if obj.get("url") != endpoint:
        errors.append(
            LineError("invalid_url", f"url must be {endpoint!r} (the batch's endpoint)", "url", lineno)
        )
    body = obj.get("body")
    if not isinstance(body, dict):
        errors.append(LineError("missing_required_parameter", "body must be an object", "body", lineno))
        return {}, errors
    model = body.get("model")
    if not isinstance(model, str) or not model:
        errors.append(
            LineError(
                "missing_required_parameter",
                "body.model must name a route or a provider",
                "body.model",
                lineno,
            )
        )
        return {}, errors
    item: dict[str, Any] = {}
    if "custom_id" in obj:
        item["custom_id"] = obj["custom_id"]
    if model in routes or model not in providers:
        item["route"] = model  # an unknown model is reported by the native validator as a route
    else:
        item["provider"] = model
    fields, problem = line_body(endpoint).read(body)
    if problem is not None:
        return {}, [*errors, LineError(*problem, lineno)]
    item.update(fields)
    return item, errors


def line_error_from_native(
    index: int | None,
    field: str,
    message: str,
    lines: list[int],
    *,
    items: list[dict[str, Any]] | None = None,
    model_names: Iterable[str] = (),
) -> LineError:
    """A native FieldError (item index, ITEM field) → an OpenAI line error (line, body param). With the
    validated ``items`` and every route and provider name, an unknown body.model gets a "did you mean"
    over both (body.model names either; the native hint speaks of the ITEM's route/provider fields)."""
    line = lines[index] if index is not None and 0 <= index < len(lines) else None
    if field in ("route", "provider"):
        text, _, _ = message.partition(HINT_SEPARATOR)
        text = text.replace("unknown route", "unknown model").replace(
            ": no enabled routing rule", ": no route"
        )
        model = _model_of(items, index)
        if model is not None and text.startswith("unknown"):
            guess = difflib.get_close_matches(model, sorted(model_names), n=1, cutoff=0.6)
            if guess and guess[0] != model:
                text += f"{HINT_SEPARATOR}did you mean {guess[0]!r}?"
        return LineError(
            "model_not_found", text + " (body.model names a route or a provider)", "body.model", line
        )
    if field == "custom_id":
        code = "duplicate_custom_id" if message.startswith("duplicate") else "invalid_request"
        return LineError(code, message, "custom_id", line)
    if field.startswith("params"):
        return LineError("invalid_request", message, "body" + field[len("params") :], line)
    if field.startswith(("messages", "input")):
        return LineError("invalid_request", message, "body." + field, line)
    if field == "items":
        return LineError("too_many_requests" if "at most" in message else "empty_file", message, None, line)
    return LineError("invalid_request", message, None if field in ("item", "body") else field, line)


def _model_of(items: list[dict[str, Any]] | None, index: int | None) -> str | None:
    if items is None or index is None or not 0 <= index < len(items):
        return None
    model = items[index].get("route") or items[index].get("provider")
    return model if isinstance(model, str) else None


# --- output -----------------------------------------------------------------------------------------


def request_line_id(batch_key: str, custom_id: str) -> str:
    return f"batch_req_{uuid.uuid5(uuid.NAMESPACE_URL, f'{batch_key}/{custom_id}').hex}"


def result_line(
    result: dict[str, Any], batch_key: str, endpoint: str = CHAT_COMPLETIONS
) -> tuple[bool, dict[str, Any]]:
    """(goes to the output file?, the line) for one native RESULT (its answer in ``endpoint``'s shape)."""
    custom_id = result["custom_id"]
    line_id = request_line_id(batch_key, custom_id)
    request_id = f"req_{line_id[len('batch_req_') :]}"
    if result["ok"]:
        body = line_body(endpoint).write(result["response"], line_id)
        response = {"status_code": 200, "request_id": request_id, "body": body}
        return True, {"id": line_id, "custom_id": custom_id, "response": response, "error": None}
    error = result["error"] or {}
    status = result.get("status") or ""
    kind = error_kind(error.get("type") or error_type_of_status(status))
    message = error.get("message") or kind.name
    status_code = error.get("status_code")
    if kind.provider_answer and status_code:
        body = {
            "error": {"message": message, "type": kind.openai_type, "param": None, "code": kind.line_code}
        }
        response = {"status_code": status_code, "request_id": request_id, "body": body}
        return False, {"id": line_id, "custom_id": custom_id, "response": response, "error": None}
    return False, {
        "id": line_id,
        "custom_id": custom_id,
        "response": None,
        "error": {"code": kind.line_code, "message": message},
    }


def split_results(
    results: Iterable[dict[str, Any]], batch_key: str, endpoint: str = CHAT_COMPLETIONS
) -> Iterator[tuple[bool, bytes]]:
    """(to output file?, one encoded JSONL line) per RESULT, in submission order."""
    for result in results:
        ok, line = result_line(result, batch_key, endpoint)
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        yield ok, text.encode("utf-8", "backslashreplace")

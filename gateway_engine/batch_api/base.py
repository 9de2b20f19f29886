"""What the kinds' batch clients share: the HTTP calls (through gateway_engine.http_batch), JSON answers
read and refused the same way, the JSONL reader, the call counter."""

from __future__ import annotations

import json
from typing import Any

from ..http_batch import BatchHttp, RawAnswer
from .errors import call_error, invalid_answer, parsed
from .types import BatchApiError, BatchTarget


def compact(value: Any) -> bytes:
    """The JSON bytes sent (no spaces, UTF-8 kept: the bytes a size limit counts)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class BatchClientBase:
    """HTTP plumbing of one provider's batch client; ``http_calls`` counts every call made."""

    envelope_bytes = 0  # bytes a create adds around the encoded lines (OpenAI/Azure: none, a file)

    def __init__(self, target: BatchTarget, http: BatchHttp | None = None):
        self.target = target
        self._own_http = http is None
        self.http = http if http is not None else BatchHttp(timeout_s=target.timeout_s)
        self.http_calls = 0

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    async def call(
        self,
        what: str,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        content_type: str = "application/json",
        download: bool = False,
    ) -> RawAnswer:
        """One call; BatchApiError unless it answered 2xx."""
        self.http_calls += 1
        answer = await self.http.request(
            method, url, headers=self.headers(), body=body, content_type=content_type, download=download
        )
        if not answer.ok:
            raise call_error(self.target.kind, answer, what, self.target.api_key or "")
        return answer

    async def json_call(
        self,
        what: str,
        method: str,
        url: str,
        payload: Any = None,
        *,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """A call (a JSON ``payload``, or a raw ``body``) whose 2xx answer must be a JSON object."""
        if payload is not None:
            body = compact(payload)
        answer = await self.call(what, method, url, body=body, content_type=content_type)
        value = parsed(answer)
        if not isinstance(value, dict):
            raise invalid_answer(what, "the answer is not a JSON object", answer.status)
        return value

    async def aclose(self) -> None:
        if self._own_http:
            await self.http.aclose()


def jsonl(data: bytes, what: str) -> list[dict[str, Any]]:
    """The objects of a JSONL file (blank lines skipped); BatchApiError (invalid_response) otherwise."""
    rows = []
    for n, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise invalid_answer(what, f"line {n} is not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise invalid_answer(what, f"line {n} is not a JSON object")
        rows.append(row)
    return rows


def need(obj: dict[str, Any], key: str, kind: type, what: str) -> Any:
    """``obj[key]``, refused (invalid_response) unless it is a ``kind``."""
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise invalid_answer(what, f"field {key!r} missing or not a {kind.__name__}")
    return value


__all__ = ["BatchApiError", "BatchClientBase", "compact", "jsonl", "need"]

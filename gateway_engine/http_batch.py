"""The batch-API half of the one module that owns outbound HTTP (gateway_engine.http): plain requests
to a provider's files / batches endpoints (a JSON POST or GET, a multipart upload, a file download),
with the same rules as ``gateway_engine.http``: one pooled keep-alive aiohttp client, no hidden retries, one hard
deadline per call covering connect + send + reading the whole answer, every answer read with a size cap
(``BoundedBody``: gzip/deflate decoded, a bomb refused). Nothing here raises for HTTP or network errors:
every call returns a ``RawAnswer``; what an answer means is the batch client's (gateway_engine.batch_api).

Caps: JSON answers ``max_answer_bytes`` (4 MB, as real-time answers); downloads (result files)
``max_download_bytes`` (default 512 MB: a full 50,000-line output file fits).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp

from .answers import AnswerRejected, BoundedBody, declared_too_large
from .http import DEFAULT_MAX_ANSWER_BYTES, READ_CHUNK, REQUEST_HEADERS
from .retry import ErrorType

__all__ = ["DEFAULT_MAX_DOWNLOAD_BYTES", "BatchHttp", "RawAnswer", "multipart_body"]

DEFAULT_MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class RawAnswer:
    """One batch-API call's answer: ``status`` 0 and ``error_type`` set when there was none (timeout,
    connection error) or it could not be read (too large, undecodable: ``invalid_response``)."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    error_type: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error_type is None and 200 <= self.status < 300


def multipart_body(fields: Mapping[str, str], file_field: str, filename: str, data: bytes,
                   file_type: str = "application/jsonl") -> tuple[bytes, str]:  # fmt: skip
    """A multipart/form-data body (RFC 7578) of text ``fields`` and one file: (bytes, content type)."""
    boundary = f"gw-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\n'
            f"Content-Type: {file_type}\r\n\r\n")  # fmt: skip
    parts += [head.encode(), data, f"\r\n--{boundary}--\r\n".encode()]
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class BatchHttp:
    """Pooled client for one provider's batch API. Create it inside the event loop that uses it."""

    def __init__(
        self,
        *,
        timeout_s: float = 60.0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
        pool: int = 4,
    ):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes
        self.max_download_bytes = max_download_bytes
        self.calls = 0
        self._session: aiohttp.ClientSession | None = None
        self._pool = pool

    def _aiohttp(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool, limit_per_host=0, keepalive_timeout=30.0),
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=None),  # the deadline is asyncio.timeout below
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        content_type: str = "application/json",
        download: bool = False,
    ) -> RawAnswer:
        """One call; ``download``: the answer is a file (``max_download_bytes`` instead of the JSON cap)."""
        self.calls += 1
        sent = {**REQUEST_HEADERS, **headers}
        if body is None:
            sent.pop("Content-Type", None)
        else:
            sent["Content-Type"] = content_type
        cap = self.max_download_bytes if download else self.max_answer_bytes
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._send(method, url, sent, body, cap)
        except TimeoutError:
            return RawAnswer(0, error_type=ErrorType.TIMEOUT, message=f"no answer within {self.timeout_s:g}s")
        except (aiohttp.ClientError, OSError) as exc:
            return RawAnswer(0, error_type=ErrorType.CONNECTION_ERROR, message=f"{type(exc).__name__}: {exc}")

    async def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, cap: int
    ) -> RawAnswer:
        async with self._aiohttp().request(
            method, url, data=body, headers=headers, allow_redirects=False
        ) as resp:
            status, resp_headers = resp.status, {k.lower(): v for k, v in resp.headers.items()}
            encoding = resp.headers.get("Content-Encoding")
            try:
                if declared_too_large(resp.headers.get("Content-Length"), cap, encoding):
                    raise AnswerRejected(f"answer larger than {cap} bytes")
                bounded = BoundedBody(cap, encoding)
                async for chunk in resp.content.iter_chunked(READ_CHUNK):
                    bounded.feed(chunk)
                raw = bounded.finish()
            except AnswerRejected as exc:
                resp.close()
                return RawAnswer(
                    status, headers=resp_headers, error_type=ErrorType.INVALID_RESPONSE, message=str(exc)
                )
        return RawAnswer(status, raw, resp_headers)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

"""The one module that talks HTTP to providers.

One pooled keep-alive client per provider (pool ≥ the provider's max_concurrency), no hidden retries
anywhere (no SDK; aiohttp never re-sends a POST, httpx runs with transport retries=0), one hard
per-attempt deadline of the provider's ``timeout_seconds`` covering connect + send + reading the whole
answer. Every call returns an ``HttpOutcome``; nothing here raises for HTTP or network errors, and
nothing here retries.

Every answer is cleaned here before anyone stores or counts it (``_outcome``, ``parse_answer``):

* the body is read in chunks and decompressed here (gzip/deflate, never trusting the sender's
  sizes), and refused as ``invalid_response`` once it passes ``max_answer_bytes`` decompressed — a
  5 MB body or a gzip bomb costs at most that much memory;
* a 2xx answer must be a JSON object (``<html>`` or text → ``invalid_response``); ``NaN``/``Infinity``
  and numbers that overflow a float → ``invalid_response``; more than ``MAX_JSON_DEPTH`` levels →
  ``invalid_response``;
* NUL characters and lone surrogates in any string (keys too) are replaced by U+FFFD, so PostgreSQL
  text/jsonb can always hold the answer;
* usage counts are clamped to ``0 ≤ n ≤ MAX_USAGE_TOKENS``;
* error messages shown to teams are short and sanitised (``sanitize_message``: no URLs, hosts, IPs,
  header lines or bodies); the full (capped, cleaned) error body goes to ``HttpOutcome.detail`` for
  staff only (the attempt log).

The engine uses ``AiohttpProviderClient`` (aiohttp): against a ~1 ms provider it costs about a third
of httpx's CPU per call (see docs/benchmarks.md, "Overhead"). ``ProviderClient`` (httpx, public API
only) is kept for callers that inject an httpx transport (``HttpClients(transport_factory=...)``,
respx in tests).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import re
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import aiohttp
import httpx

from .retry import ErrorType, error_type_for_status
from .routing import ProviderConfig

KEEP_HEADERS = (
    "retry-after",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
)
MAX_HEADER_CHARS = 200  # a kept header value longer than this is cut (it is only ever parsed)
MAX_MESSAGE_CHARS = 200  # what a team sees of a provider's error message
MAX_DETAIL_CHARS = 4000  # what staff see of a provider's error body (attempt log)
DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_USAGE_TOKENS = 10_000_000  # per answer and per count; no model answers more
MAX_JSON_DEPTH = 64
READ_CHUNK = 64 * 1024
# The gateway sets these itself ({"model": provider.model, "messages": …, **params}): a caller's value
# would override the provider's model or the messages, and streamed answers are not read. Submission
# (batches.submission) refuses them in an item's params; the clients below never send them.
RESERVED_PARAMS = frozenset({"model", "messages", "stream"})
REPLACEMENT = "\ufffd"


@dataclass
class HttpOutcome:
    status_code: int | None
    latency_ms: int
    body: Any = None
    error_type: str = ""  # "" when the attempt produced a usable answer
    message: str = ""  # short, sanitised: safe to show the team
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] | None = None
    detail: str = ""  # staff only: the (cleaned, capped) error body or exception text

    @property
    def ok(self) -> bool:
        return not self.error_type


class AnswerRejected(Exception):
    """The answer cannot be used as it is (too large, undecodable, not finite, nested too deeply)."""


class NotJson(AnswerRejected):
    """The answer is not JSON at all (text, HTML)."""


# ---- cleaning ----------------------------------------------------------------------------------------

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """NUL and lone surrogates → U+FFFD (PostgreSQL text and jsonb can hold neither)."""
    return _BAD_CHARS.sub(REPLACEMENT, text) if _BAD_CHARS.search(text) else text


def clean_value(value: Any, depth: int = 0) -> Any:
    """A JSON value with every string (keys too) cleaned; AnswerRejected past MAX_JSON_DEPTH levels or
    on a non-finite number."""
    if isinstance(value, str):
        return clean_text(value)
    if depth >= MAX_JSON_DEPTH:
        raise AnswerRejected(f"answer nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        return {clean_text(k): clean_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise AnswerRejected("answer holds a non-finite number")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise AnswerRejected(f"answer holds a number too large for a float ({text[:20]}…)")
    return value


def _reject_constant(name: str) -> None:
    raise AnswerRejected(f"answer holds {name}, which is not JSON")


def parse_answer(raw: bytes) -> Any:
    """Parse and clean a JSON answer; None for an empty body; AnswerRejected if unusable.

    Only answers that can hold a NUL or a surrogate (an escape ``\\u`` or a 0xED byte) are walked."""
    if not raw:
        return None
    try:
        body = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise AnswerRejected("answer nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, AnswerRejected):
            raise
        raise NotJson("answer is not JSON") from None
    if isinstance(body, (dict, list)) and (b"\\u" in raw or b"\xed" in raw or _deep(raw)):
        body = clean_value(body)
    elif isinstance(body, str):
        body = clean_text(body)
    return body


def _deep(raw: bytes) -> bool:
    """Cheap upper bound: could the document nest deeper than MAX_JSON_DEPTH?"""
    return raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH


def parse_usage(body: Any) -> dict[str, int] | None:
    """The OpenAI-style ``usage`` object with each count clamped to [0, MAX_USAGE_TOKENS], or None."""
    if not isinstance(body, dict) or not isinstance(body.get("usage"), dict):
        return None
    raw = body["usage"]

    def num(key: str) -> int:
        value = raw.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            return 0
        if not math.isfinite(value):
            return 0
        return int(min(value, MAX_USAGE_TOKENS))

    prompt, completion = num("prompt_tokens"), num("completion_tokens")
    total = num("total_tokens") or prompt + completion
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": min(total, MAX_USAGE_TOKENS),
    }


_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_IPV6_CANDIDATE = re.compile(r"\[?[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}\]?(?::\d+)?", re.I)
# host names: a name with a port, or ending in a common/internal top-level label (not "messages.content")
_TLDS = (
    "com|net|org|io|ai|dev|app|cloud|co|us|eu|uk|de|fr|jp|cn|info|biz|xyz|internal|local|localdomain|lan|"
    "corp|intra|svc|cluster|example|test|invalid"
)
_HOST = re.compile(
    rf"\b(?:(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:{_TLDS})\b(?::\d+)?"
    r"|(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z0-9-]*[a-z][a-z0-9-]*:\d{2,5}\b|\blocalhost\b)",
    re.I,
)
_SECRET = re.compile(r"\b(?:bearer\s+\S+|sk-[A-Za-z0-9_-]{6,}\S*|key-[A-Za-z0-9_-]{6,})", re.I)
_HEADER_LINE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9-]*:\s.*$", re.M)


def _ipv6_or_same(match: re.Match[str]) -> str:
    candidate = match.group(0)
    address = candidate.lstrip("[").split("]")[0]
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return candidate
    return "[address]"


def sanitize_message(text: str) -> str:
    """A short message safe to show a team: the first line of ``text`` without URLs, host names, IP
    addresses, secrets or header lines, at most MAX_MESSAGE_CHARS characters."""
    text = clean_text(text)
    text = _HEADER_LINE.sub("", text)
    text = _URL.sub("[url]", text)
    text = _SECRET.sub("[redacted]", text)
    text = _IPV4.sub("[address]", text)
    text = _IPV6_CANDIDATE.sub(_ipv6_or_same, text)
    text = _HOST.sub("[host]", text)
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = "".join(ch if ch.isprintable() else " " for ch in line)
    return line[:MAX_MESSAGE_CHARS]


def provider_message(status: int, body: Any) -> str:
    """What a team sees of an error answer: the provider's JSON error message, sanitised, or 'HTTP n'."""
    message = ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = err["message"]
        elif isinstance(err, str):
            message = err
        elif isinstance(body.get("message"), str):
            message = body["message"]
    message = sanitize_message(message)
    return message or f"HTTP {status}"


def exception_message(exc: BaseException) -> str:
    """A connection failure as a team sees it: the exception class only (its text names hosts)."""
    return f"connection failed ({type(exc).__name__})"


def chat_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


# ---- bounded reading -----------------------------------------------------------------------------------


class BoundedBody:
    """Collects an answer's raw chunks, decompressing gzip/deflate itself, and refuses more than
    ``limit`` bytes of decompressed body (AnswerRejected) — whatever the sender claims."""

    def __init__(self, limit: int, content_encoding: str | None):
        self.limit = limit
        encoding = (content_encoding or "identity").strip().lower()
        if encoding in ("", "identity"):
            self._inflate = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
            self._raw_deflate = encoding == "deflate"
        else:
            raise AnswerRejected(f"unsupported Content-Encoding {encoding[:40]!r}")
        self._parts: list[bytes] = []
        self.size = 0

    def _add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise AnswerRejected(f"answer larger than {self.limit} bytes")
        self._parts.append(data)

    def feed(self, chunk: bytes) -> None:
        if self._inflate is None:
            self._add(chunk)
            return
        data = chunk
        while data:
            try:
                out = self._inflate.decompress(data, self.limit - self.size + 1)
            except zlib.error:
                if self._raw_deflate and not self._parts and self.size == 0:  # headerless deflate
                    self._inflate, self._raw_deflate = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise AnswerRejected("answer is not valid gzip/deflate data") from None
            self._add(out)
            data = self._inflate.unconsumed_tail

    def finish(self) -> bytes:
        if self._inflate is not None:
            self._add(self._inflate.flush())
        return b"".join(self._parts)


def _declared_too_large(length: str | None, limit: int, encoding: str | None) -> bool:
    if not length or (encoding or "identity").strip().lower() not in ("", "identity"):
        return False
    try:
        return int(length) > limit
    except ValueError:
        return False


# ---- outcomes --------------------------------------------------------------------------------------------


def _kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {h: clean_text(str(headers[h]))[:MAX_HEADER_CHARS] for h in KEEP_HEADERS if h in headers}


def _timeout(started: float, timeout: float) -> HttpOutcome:
    return HttpOutcome(
        None,
        int((time.monotonic() - started) * 1000),
        error_type=ErrorType.TIMEOUT,
        message=f"no complete answer within {timeout:g} s",
    )


def _connection_failed(started: float, exc: BaseException) -> HttpOutcome:
    return HttpOutcome(
        None,
        int((time.monotonic() - started) * 1000),
        error_type=ErrorType.CONNECTION_ERROR,
        message=exception_message(exc),
        detail=clean_text(f"{type(exc).__name__}: {exc}")[:MAX_DETAIL_CHARS],
    )


def _rejected(status: int, latency: int, headers: Mapping[str, str], exc: AnswerRejected) -> HttpOutcome:
    """An answer we refused to read or keep. On a 2xx it is ``invalid_response``; on an error status
    the status decides the type (the body was never needed)."""
    error_type = ErrorType.INVALID_RESPONSE if 200 <= status < 300 else error_type_for_status(status)
    return HttpOutcome(
        status,
        latency,
        error_type=error_type,
        message=f"HTTP {status}: {exc}" if error_type != ErrorType.INVALID_RESPONSE else str(exc),
        headers=_kept_headers(headers),
    )


def _outcome(status: int, latency: int, raw: bytes, headers: Mapping[str, str]) -> HttpOutcome:
    """An HttpOutcome from a complete answer (status, decompressed body bytes, response headers)."""
    kept = _kept_headers(headers)
    try:
        body = parse_answer(raw)
    except NotJson:
        body = None
    except AnswerRejected as exc:
        if 200 <= status < 300:
            return HttpOutcome(
                status,
                latency,
                error_type=ErrorType.INVALID_RESPONSE,
                message=str(exc),
                headers=kept,
                detail=_detail(raw),
            )
        body = None
    if 200 <= status < 300:
        if not isinstance(body, dict):
            kind = "HTML" if raw.lstrip()[:1] == b"<" else "not a JSON object"
            return HttpOutcome(
                status,
                latency,
                error_type=ErrorType.INVALID_RESPONSE,
                message=f"answer is {kind}",
                headers=kept,
                detail=_detail(raw),
            )
        return HttpOutcome(status, latency, body=body, headers=kept, usage=parse_usage(body))
    return HttpOutcome(
        status,
        latency,
        body=body if isinstance(body, dict) else None,
        error_type=error_type_for_status(status),
        message=provider_message(status, body),
        headers=kept,
        usage=parse_usage(body),
        detail=_detail(raw),
    )


def _detail(raw: bytes) -> str:
    return clean_text(raw[: MAX_DETAIL_CHARS * 4].decode("utf-8", errors="replace"))[:MAX_DETAIL_CHARS]


# ---- clients ---------------------------------------------------------------------------------------------

REQUEST_HEADERS = {
    "Content-Type": "application/json",
    "User-Agent": "batch-gateway/1",
    "Accept-Encoding": "gzip, deflate",  # what BoundedBody can decode
}


class ProviderClient:
    """Pooled keep-alive httpx client for one provider (public httpx API only)."""

    def __init__(
        self,
        config: ProviderConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ):
        self.config = config
        self.url = chat_url(config.base_url)
        self.max_answer_bytes = max_answer_bytes
        pool = max(1, config.max_concurrency)
        limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool, keepalive_expiry=30.0)
        headers = dict(REQUEST_HEADERS)
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(retries=0, limits=limits),
            timeout=httpx.Timeout(config.timeout_seconds),
            headers=headers,
            follow_redirects=False,
        )

    async def chat(
        self,
        messages: list[Any],
        params: Mapping[str, Any] | None = None,
        *,
        request_id: str = "",
        on_sent: Callable[[], None] | None = None,
    ) -> HttpOutcome:
        """One chat completion. ``on_sent`` is called once the request is handed to the connection
        (httpx has no hook there: just before the send)."""
        payload = {"model": self.config.model, "messages": messages}
        payload.update({k: v for k, v in (params or {}).items() if k not in RESERVED_PARAMS})
        extra = {"X-Request-ID": request_id} if request_id else None
        timeout = self.config.timeout_seconds
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                request = self._client.build_request("POST", self.url, json=payload, headers=extra)
                if on_sent is not None:
                    on_sent()
                response = await self._client.send(request, stream=True)
                try:
                    status, headers = response.status_code, response.headers
                    try:
                        raw = await self._read(response)
                    except AnswerRejected as exc:
                        return _rejected(status, int((time.monotonic() - started) * 1000), headers, exc)
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            return _timeout(started, timeout)
        except httpx.HTTPError as exc:
            return _connection_failed(started, exc)
        return _outcome(status, int((time.monotonic() - started) * 1000), raw, headers)

    async def _read(self, response: httpx.Response) -> bytes:
        encoding = response.headers.get("content-encoding")
        if _declared_too_large(response.headers.get("content-length"), self.max_answer_bytes, encoding):
            raise AnswerRejected(f"answer larger than {self.max_answer_bytes} bytes")
        body = BoundedBody(self.max_answer_bytes, encoding)
        async for chunk in response.aiter_raw(READ_CHUNK):
            body.feed(chunk)
        return body.finish()

    async def aclose(self) -> None:
        await self._client.aclose()


class _SentHook:
    """The per-request context of ``_SENT_TRACE``: calls ``on_sent`` once."""

    __slots__ = ("on_sent",)

    def __init__(self, on_sent: Callable[[], None]):
        self.on_sent: Callable[[], None] | None = on_sent

    def fire(self) -> None:
        on_sent, self.on_sent = self.on_sent, None
        if on_sent is not None:
            on_sent()


async def _headers_sent(session: Any, ctx: Any, params: Any) -> None:
    hook = getattr(ctx, "trace_request_ctx", None)
    if isinstance(hook, _SentHook):
        hook.fire()


_SENT_TRACE = aiohttp.TraceConfig()
_SENT_TRACE.on_request_headers_sent.append(_headers_sent)
_SENT_TRACE.freeze()


class AiohttpProviderClient:
    """Pooled keep-alive aiohttp client for one provider (same contract as ProviderClient).

    Create it inside the event loop that will use it. aiohttp re-sends nothing: a request on a
    keep-alive connection the server has closed fails as a connection error (retried by the engine
    like any other), only idempotent methods would be retried by aiohttp itself and this is a POST.
    aiohttp's own decompression is off: BoundedBody decompresses with a size cap.
    """

    def __init__(self, config: ProviderConfig, *, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES):
        self.config = config
        self.url = chat_url(config.base_url)
        self.max_answer_bytes = max_answer_bytes
        pool = max(1, config.max_concurrency)
        self._headers = dict(REQUEST_HEADERS)
        if config.api_key:
            self._headers["Authorization"] = f"Bearer {config.api_key}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool, limit_per_host=0, keepalive_timeout=30.0),
            trace_configs=[_SENT_TRACE],
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),  # the deadline is asyncio.timeout below
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding",),
        )

    async def chat(
        self,
        messages: list[Any],
        params: Mapping[str, Any] | None = None,
        *,
        request_id: str = "",
        on_sent: Callable[[], None] | None = None,
    ) -> HttpOutcome:
        """One chat completion. ``on_sent`` is called once the request's headers are written to the
        connection (aiohttp's ``on_request_headers_sent``): after a connection was found or opened."""
        payload = {"model": self.config.model, "messages": messages}
        payload.update({k: v for k, v in (params or {}).items() if k not in RESERVED_PARAMS})
        headers = self._headers
        if request_id:
            headers = {**headers, "X-Request-ID": request_id}
        data = json.dumps(payload).encode()
        timeout = self.config.timeout_seconds
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(
                    self.url,
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    trace_request_ctx=_SentHook(on_sent) if on_sent is not None else None,
                ) as response:
                    status, resp_headers = response.status, response.headers
                    try:
                        raw = await self._read(response)
                    except AnswerRejected as exc:
                        response.close()  # do not drain an unwanted body into a pooled connection
                        return _rejected(status, int((time.monotonic() - started) * 1000), resp_headers, exc)
        except TimeoutError:
            return _timeout(started, timeout)
        except (aiohttp.ClientError, OSError) as exc:
            return _connection_failed(started, exc)
        return _outcome(status, int((time.monotonic() - started) * 1000), raw, resp_headers)

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        encoding = response.headers.get("Content-Encoding")
        if _declared_too_large(response.headers.get("Content-Length"), self.max_answer_bytes, encoding):
            raise AnswerRejected(f"answer larger than {self.max_answer_bytes} bytes")
        if encoding is None and response.content_length is not None:
            return await response.read()  # identity, declared length within the cap: aiohttp stops there
        body = BoundedBody(self.max_answer_bytes, encoding)
        async for chunk in response.content.iter_chunked(READ_CHUNK):
            body.feed(chunk)
        return body.finish()

    async def aclose(self) -> None:
        await self._session.close()


# a provider's config -> the httpx transport to call it through (tests inject respx or a mock transport)
TransportFactory: TypeAlias = Callable[[ProviderConfig], httpx.AsyncBaseTransport]


TRANSPORTS = ("aiohttp", "httpx")


def check_transport(transport: str) -> str:
    """The provider transport's name, refused loudly unless it is one of TRANSPORTS."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport: must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    return transport


class HttpClients:
    """One client per provider for the lifetime of one engine run (one event loop).

    ``transport="aiohttp"`` (the default: about 4x less CPU per call, docs/engine.md) or ``"httpx"``
    (ProviderClient, public httpx API). A ``transport_factory`` (config -> httpx transport) selects httpx
    with that transport (tests, proxies)."""

    def __init__(
        self,
        transport_factory: TransportFactory | None = None,
        *,
        transport: str = "aiohttp",
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ):
        self._clients: dict[str, AiohttpProviderClient | ProviderClient] = {}
        self._retired: list[AiohttpProviderClient | ProviderClient] = []
        self._transport_factory = transport_factory
        self.transport = "httpx" if transport_factory is not None else check_transport(transport)
        self.max_answer_bytes = max_answer_bytes

    def get(self, config: ProviderConfig) -> AiohttpProviderClient | ProviderClient:
        client = self._clients.get(config.name)
        if client is None or client.config != config:
            if client is not None:  # config changed mid-run: the old pool drains when closed at the end
                self._retired.append(client)
            if self.transport == "httpx":
                factory = self._transport_factory
                client = ProviderClient(
                    config,
                    transport=factory(config) if factory is not None else None,
                    max_answer_bytes=self.max_answer_bytes,
                )
            else:
                client = AiohttpProviderClient(config, max_answer_bytes=self.max_answer_bytes)
            self._clients[config.name] = client
        return client

    async def aclose(self) -> None:
        clients = list(self._clients.values()) + self._retired
        self._clients.clear()
        self._retired = []
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)

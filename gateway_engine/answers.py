"""Answer cleaning: what every provider answer goes through before anyone stores or counts it.

Whatever the wire format (gateway_engine.wire), an answer is read, parsed and cleaned here:

* ``BoundedBody`` collects the body in chunks and decompresses it (gzip/deflate, never trusting the
  sender's sizes), refusing it (``AnswerRejected``) once it passes the caller's cap decompressed — a
  5 MB body or a gzip bomb costs at most that much memory;
* ``parse_answer``: ``NaN``/``Infinity`` and numbers that overflow a float → ``AnswerRejected``; more
  than ``MAX_JSON_DEPTH`` levels → ``AnswerRejected``; text or HTML → ``NotJson``;
* NUL characters and lone surrogates in any string (keys too) are replaced by U+FFFD, so PostgreSQL
  text/jsonb can always hold the answer (``clean_text``, ``clean_value``);
* usage counts are clamped to ``0 ≤ n ≤ MAX_USAGE_TOKENS`` (``clamp_count``, used by the wire formats);
* error messages shown to teams are short and sanitised (``sanitize_message``: no URLs, hosts, IPs,
  header lines, bodies or key-shaped strings); ``detail`` is the capped, cleaned error body staff see
  (the attempt log);
* the provider's own configured key is taken out of every answer before it is read (``without_secret``):
  an upstream that echoes the key, whatever its shape, shows ``[redacted]`` everywhere.

gateway_engine.http decides what an answer *means* (with the provider's wire format); this module only
makes it safe to hold.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import zlib
from typing import Any

MAX_HEADER_CHARS = 200  # a kept header value longer than this is cut (it is only ever parsed)
MAX_MESSAGE_CHARS = 200  # what a team sees of a provider's error message
MAX_DETAIL_CHARS = 4000  # what staff see of a provider's error body (attempt log)
MAX_USAGE_TOKENS = 10_000_000  # per answer and per count; no model answers more
MAX_JSON_DEPTH = 64
REPLACEMENT = "\ufffd"


class AnswerRejected(Exception):
    """The answer cannot be used as it is (too large, undecodable, not finite, nested too deeply)."""


class NotJson(AnswerRejected):
    """The answer is not JSON at all (text, HTML)."""


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


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def parse_answer(raw: bytes) -> Any:
    """Parse and clean a JSON answer; None for an empty body; AnswerRejected if unusable.

    Only answers that can hold a NUL or a surrogate (an escape ``\\u`` or a 0xED byte) are walked."""
    if not raw:
        return None
    try:
        # as json.loads decodes bytes (its encoding detection), then one decoder for every answer:
        # json.loads with hooks builds a new decoder per call (about 5x the parse of a small event)
        text = (
            raw.decode(json.detect_encoding(raw), "surrogatepass")
            if isinstance(raw, (bytes, bytearray))
            else raw
        )
        body = _DECODER.decode(text)  # one decoder for every answer: json.loads would build one per call
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


def clamp_count(value: Any) -> int:
    """A token count from an answer: a positive finite number clamped to MAX_USAGE_TOKENS, else 0."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        return 0
    if not math.isfinite(value):
        return 0
    return int(min(value, MAX_USAGE_TOKENS))


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
# the common key shapes (the configured key itself is taken out of the raw answer first: ``without_secret``)
_SECRET = re.compile(
    r"\b(?:bearer\s+\S+|basic\s+[A-Za-z0-9+/=]{8,}"
    r"|(?:sk|rk|pk)[-_][A-Za-z0-9_-]{6,}\S*|key-[A-Za-z0-9_-]{6,}"  # OpenAI, Anthropic, Stripe-like, Mailgun
    r"|AIza[0-9A-Za-z_-]{20,}"  # Google (Gemini)
    r"|(?:gsk|hf|ghp|gho|ghs|ghu|github_pat|glpat|xai|pplx|nvapi|r8)[-_][A-Za-z0-9_-]{12,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key id
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # a JWT
    r"|(?:aws_secret_access_key|api[-_]?key|access[-_]?token|secret|password|token)\s*[:=]\s*\S+)",
    re.I,
)
MIN_SECRET_CHARS = 8  # a configured key shorter than this is not searched for (it would match words)
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


def without_secret(raw: bytes, secret: str) -> bytes:
    """``raw`` with every occurrence of the provider's own key (as sent, and as a JSON string would
    escape it) replaced by ``[redacted]``: done on the whole answer before anything reads it, so no
    message, detail or cut at MAX_MESSAGE_CHARS can keep a piece of it, whatever the key's shape."""
    if len(secret) < MIN_SECRET_CHARS or not raw:
        return raw
    for form in {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}:
        raw = raw.replace(form.encode("utf-8", "replace"), b"[redacted]")
    return raw


def without_secret_text(text: str, secret: str) -> str:
    """The same for text already read (a stream error's message, a batch line's error)."""
    if len(secret) < MIN_SECRET_CHARS or not text:
        return text
    return text.replace(secret, "[redacted]")


def exception_message(exc: BaseException) -> str:
    """A connection failure as a team sees it: the exception class only (its text names hosts)."""
    return f"connection failed ({type(exc).__name__})"


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


def declared_too_large(length: str | None, limit: int, encoding: str | None) -> bool:
    if not length or (encoding or "identity").strip().lower() not in ("", "identity"):
        return False
    try:
        return int(length) > limit
    except ValueError:
        return False


def detail(raw: bytes) -> str:
    """What staff see of an answer body: decoded, cleaned, at most MAX_DETAIL_CHARS characters."""
    return clean_text(raw[: MAX_DETAIL_CHARS * 4].decode("utf-8", errors="replace"))[:MAX_DETAIL_CHARS]


def kept_header(value: object) -> str:
    """A response header value as an outcome keeps it: cleaned, at most MAX_HEADER_CHARS characters."""
    return clean_text(str(value))[:MAX_HEADER_CHARS]

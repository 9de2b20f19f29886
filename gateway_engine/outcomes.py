"""What one HTTP attempt came to: ``HttpOutcome``, built from a complete answer, a refused one, a
timeout or a connection failure (gateway_engine.http calls these; nothing here does I/O).

The provider's wire format (gateway_engine.wire) says what an answer means (usage, the rate-limit
headers kept, an error answer's type and message); gateway_engine.answers makes it safe to hold.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .answers import (
    MAX_DETAIL_CHARS,
    AnswerRejected,
    NotJson,
    clean_text,
    detail,
    exception_message,
    kept_header,
    parse_answer,
    without_secret,
)
from .retry import ErrorType
from .wire import Pause
from .wire.base import AnswerReading


@dataclass
class HttpOutcome:
    """One HTTP attempt as the engine sees it: a usable answer (``ok``) or an error type and message."""

    status_code: int | None
    latency_ms: int
    body: Any = None
    error_type: str = ""  # "" when the attempt produced a usable answer
    message: str = ""  # short, sanitised: safe to show the team
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] | None = None
    detail: str = ""  # staff only: the (cleaned, capped) error body or exception text
    native: Any = None  # the provider's own answer when ``body`` is its OpenAI translation (wire.Answer)
    pause: Pause | None = None  # the provider refuses everyone for a while (wire.ErrorVerdict.pause)
    pause_applied: bool = False  # the pause is in the store already (applied before the lease went back)
    stream: Any = None  # an open gateway_engine.streaming.UpstreamStream (``open_stream`` succeeded)

    @property
    def ok(self) -> bool:
        return not self.error_type


def kept_headers(wire: AnswerReading, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
    return {h: kept_header(v) for h, v in wire.rate_limit_headers(headers, body).items()}


def timed_out(started: float, timeout: float) -> HttpOutcome:
    return HttpOutcome(
        None,
        int((time.monotonic() - started) * 1000),
        error_type=ErrorType.TIMEOUT,
        message=f"no complete answer within {timeout:g} s",
    )


def connection_failed(started: float, exc: BaseException) -> HttpOutcome:
    return HttpOutcome(
        None,
        int((time.monotonic() - started) * 1000),
        error_type=ErrorType.CONNECTION_ERROR,
        message=exception_message(exc),
        detail=clean_text(f"{type(exc).__name__}: {exc}")[:MAX_DETAIL_CHARS],
    )


def rejected(
    wire: AnswerReading, status: int, latency: int, headers: Mapping[str, str], exc: AnswerRejected
) -> HttpOutcome:
    """An answer we refused to read or keep. On a 2xx it is ``invalid_response``; on an error status
    the status decides the type (the body was never needed)."""
    if 200 <= status < 300:
        error_type = ErrorType.INVALID_RESPONSE
    else:
        error_type = wire.classify_error(status, None).error_type
    return HttpOutcome(
        status,
        latency,
        error_type=error_type,
        message=f"HTTP {status}: {exc}" if error_type != ErrorType.INVALID_RESPONSE else str(exc),
        headers=kept_headers(wire, headers),
    )


def from_answer(
    wire: AnswerReading, status: int, latency: int, raw: bytes, headers: Mapping[str, str], secret: str = ""
) -> HttpOutcome:
    """An HttpOutcome from a complete answer (status, decompressed body bytes, response headers).
    ``secret``: the key the request carried, taken out of the answer before anything reads it
    (gateway_engine.answers.without_secret): no message, detail or pause can hold it."""
    return _from_clean_answer(wire, status, latency, without_secret(raw, secret), headers)


def _from_clean_answer(
    wire: AnswerReading, status: int, latency: int, raw: bytes, headers: Mapping[str, str]
) -> HttpOutcome:
    try:
        body = parse_answer(raw)
    except NotJson:
        body = None
    except AnswerRejected as exc:
        if 200 <= status < 300:
            kept = kept_headers(wire, headers)
            return HttpOutcome(
                status,
                latency,
                error_type=ErrorType.INVALID_RESPONSE,
                message=str(exc),
                headers=kept,
                detail=detail(raw),
            )
        body = None
    kept = kept_headers(wire, headers, body)
    if 200 <= status < 300:
        if not isinstance(body, dict):
            kind = "HTML" if raw.lstrip()[:1] == b"<" else "not a JSON object"
            return HttpOutcome(
                status,
                latency,
                error_type=ErrorType.INVALID_RESPONSE,
                message=f"answer is {kind}",
                headers=kept,
                detail=detail(raw),
            )
        answer = wire.read_answer(body)
        if answer.refusal is not None:  # a 2xx that is an error (e.g. a Gemini blocked prompt)
            return HttpOutcome(
                status,
                latency,
                body=body,
                error_type=answer.refusal.error_type,
                message=answer.refusal.message,
                headers=kept,
                usage=answer.usage,
                detail=detail(raw),
                pause=answer.refusal.pause,
            )
        return HttpOutcome(
            status, latency, body=answer.response, headers=kept, usage=answer.usage, native=answer.native
        )
    verdict = wire.classify_error(status, body)
    return HttpOutcome(
        status,
        latency,
        body=body if isinstance(body, dict) else None,
        error_type=verdict.error_type,
        message=verdict.message,
        headers=kept,
        usage=wire.usage(body),
        detail=detail(raw),
        pause=verdict.pause,
    )

"""The Google Gemini wire format (provider kind ``gemini``, docs/contract.md §5).

``POST {base_url}/models/{model}:generateContent`` (``base_url`` ends with the API version, e.g.
``https://generativelanguage.googleapis.com/v1beta``) with ``x-goog-api-key``; the body is built by
``wire.gemini_request``. Answers (https://ai.google.dev/api/generate-content#generatecontentresponse):
``candidates[{content{parts}, finishReason}]``, ``usageMetadata{promptTokenCount (cached included),
candidatesTokenCount, thoughtsTokenCount, cachedContentTokenCount}``, and a blocked prompt as a 200
with ``promptFeedback.blockReason`` and no candidates (a ``client_error``, not retried).

Errors (https://ai.google.dev/gemini-api/docs/troubleshooting) are ``{"error": {"code", "message",
"status", "details"}}``. There are no rate-limit headers: a 429 ``RESOURCE_EXHAUSTED`` carries
``google.rpc.RetryInfo.retryDelay`` (turned into ``retry-after`` here) and a ``google.rpc.QuotaFailure``
whose violations' ``quotaId`` says which quota (https://ai.google.dev/gemini-api/docs/rate-limits).
A per-day one (``…PerDay…``) resets at midnight Pacific time, so waiting its short retryDelay only
burns requests: the verdict pauses the provider until then and the retryDelay is dropped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..answers import clamp_count, sanitize_message
from ..retry import ErrorType
from ..routing import ProviderConfig
from .base import Answer, Endpoint, ErrorVerdict, ParamProblem, Pause, Usage
from .chat_shape import chat_completion, choice, normalized_usage, tool_call
from .gemini_request import translate
from .gemini_stream import GeminiStreamDecoder
from .openai import RESERVED_PARAMS, provider_message
from .translation import checked_body, message_problems, param_problems

KIND = "gemini"
PACIFIC = ZoneInfo("America/Los_Angeles")  # where Gemini's per-day quotas reset (midnight)
FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def next_pacific_midnight(now: float) -> float:
    """Unix time of the next midnight in America/Los_Angeles after ``now`` (DST-aware: the wall-clock
    date is advanced, then localized, so a 23- or 25-hour day ends at its real midnight)."""
    local = datetime.fromtimestamp(now, PACIFIC)
    tomorrow = (local + timedelta(days=1)).date()
    return datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=PACIFIC).timestamp()


def parse_usage(body: Any) -> Usage | None:
    """Normalized usage: prompt = promptTokenCount (cached included), completion = candidates +
    thoughts (thinking is billed as output), cached = cachedContentTokenCount."""
    raw = body.get("usageMetadata") if isinstance(body, dict) else None
    if not isinstance(raw, dict):
        return None
    completion = clamp_count(raw.get("candidatesTokenCount")) + clamp_count(raw.get("thoughtsTokenCount"))
    return normalized_usage(
        clamp_count(raw.get("promptTokenCount")), completion, clamp_count(raw.get("cachedContentTokenCount"))
    )


def _parts(index: int, candidate: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(joined text, OpenAI tool calls, what was left out) of one candidate's parts."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    unmapped: list[str] = []
    for j, part in enumerate(parts if isinstance(parts, list) else []):
        where = f"candidates[{index}].content.parts[{j}]"
        if not isinstance(part, dict):
            unmapped.append(f"{where}: not an object")
        elif part.get("thought") is True:
            unmapped.append(f"{where}: thought part")
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), dict) and isinstance(part["functionCall"].get("name"), str):
            call = part["functionCall"]
            calls.append(
                tool_call(str(call.get("id") or f"call_{index}_{j}"), call["name"], call.get("args"))
            )
        else:
            unmapped.append(f"{where}: {'/'.join(sorted(part)) or 'empty'} part")
    return "".join(texts), calls, unmapped


def _choice(index: int, candidate: Any, unmapped: list[str]) -> dict[str, Any]:
    candidate = candidate if isinstance(candidate, dict) else {}
    text, calls, left_out = _parts(index, candidate)
    unmapped += left_out
    reason = candidate.get("finishReason")
    if not isinstance(reason, str) or reason not in FINISH_REASONS:
        unmapped.append(f"candidates[{index}].finishReason: {reason!r} has no OpenAI finish_reason")
    return choice(candidate.get("index", index), text, calls, finish_reason(reason, bool(calls)))


def finish_reason(reason: Any, has_calls: bool) -> str:
    """The OpenAI finish_reason of a candidate's ``finishReason`` (FINISH_REASONS; ``stop`` for one it
    has no entry for), ``tool_calls`` for a ``stop`` whose candidate called functions."""
    finish = FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "tool_calls" if has_calls and finish == "stop" else finish


def blocked_prompt(body: Any) -> ErrorVerdict | None:
    """The verdict on a prompt the provider blocked (``promptFeedback.blockReason``), else None."""
    feedback = body.get("promptFeedback") if isinstance(body, dict) else None
    reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
    if not reason:
        return None
    return ErrorVerdict(
        ErrorType.CLIENT_ERROR, f"prompt blocked by the provider ({sanitize_message(str(reason))})"
    )


def read_answer(body: dict[str, Any]) -> Answer:
    usage = parse_usage(body)
    candidates = body.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        verdict = blocked_prompt(body) or ErrorVerdict(ErrorType.INVALID_RESPONSE, "answer has no candidates")
        return Answer(None, body, usage, refusal=verdict)
    unmapped: list[str] = []
    choices = [_choice(i, c, unmapped) for i, c in enumerate(candidates)]
    answer_id, model = str(body.get("responseId", "")), str(body.get("modelVersion", ""))
    return Answer(chat_completion(answer_id, model, choices, usage, unmapped), body, usage)


def _details(body: Any, kind: str) -> list[dict[str, Any]]:
    err = body.get("error") if isinstance(body, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    return [d for d in details or [] if isinstance(d, dict) and d.get("@type") == kind]


def per_day_quota(body: Any) -> str | None:
    """The first violated per-day quotaId of a QuotaFailure (``GenerateRequestsPerDayPerProjectPerModel-
    FreeTier``), else None."""
    for failure in _details(body, QUOTA_FAILURE):
        for violation in failure.get("violations") or []:
            quota = violation.get("quotaId") if isinstance(violation, dict) else None
            if isinstance(quota, str) and "PerDay" in quota:
                return quota
    return None


def _status(body: Any) -> str:
    err = body.get("error") if isinstance(body, dict) else None
    status = err.get("status") if isinstance(err, dict) else None
    return status if isinstance(status, str) else ""


def classify_error(status: int, body: Any, now: float | None = None) -> ErrorVerdict:
    message = provider_message(status, body)
    if status == 429 or _status(body) == "RESOURCE_EXHAUSTED":
        quota = per_day_quota(body)
        if quota is None:
            return ErrorVerdict(ErrorType.RATE_LIMITED, message)
        until = next_pacific_midnight(time.time() if now is None else now)
        return ErrorVerdict(
            ErrorType.RATE_LIMITED, message, Pause("per_day_quota", until, f"{quota}: {message}")
        )
    if status == 503 or _status(body) == "UNAVAILABLE":
        return ErrorVerdict(ErrorType.OVERLOADED, message)
    if status >= 500:
        return ErrorVerdict(ErrorType.SERVER_ERROR, message)
    return ErrorVerdict(ErrorType.CLIENT_ERROR, message)


def rate_limit_headers(headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
    """``retry-after`` from the body's ``RetryInfo.retryDelay`` ("30s", "1.5s"), or from a
    ``retry-after`` header if one is sent; nothing for a per-day answer (its delay is not the wait)."""
    if per_day_quota(body) is not None:
        return {}
    for info in _details(body, RETRY_INFO):
        delay = _DELAY.match(str(info.get("retryDelay", "")))
        if delay:
            return {"retry-after": delay.group(1)}
    return {"retry-after": headers["retry-after"]} if "retry-after" in headers else {}


def model_url(config: ProviderConfig) -> str:
    """``{base_url}/models/{model}`` (the method follows it: ``:generateContent``)."""
    return f"{config.base_url.rstrip('/')}/models/{config.model.removeprefix('models/')}"


def auth_headers(config: ProviderConfig) -> dict[str, str]:
    return {"x-goog-api-key": config.api_key} if config.api_key else {}


class GeminiWire:
    """The ``gemini`` kind (implements ``wire.base.WireFormat``)."""

    kind = KIND
    reserved_params = RESERVED_PARAMS

    def endpoint(self, config: ProviderConfig) -> Endpoint:
        return Endpoint(f"{model_url(config)}:generateContent", auth_headers(config))

    def body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return checked_body(translate, config, messages, params)

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        return param_problems(translate, config, params)

    def check_messages(self, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
        """Message content this kind cannot carry (a web image URL, an audio part …)."""
        return message_problems(translate, config, messages)

    def read_answer(self, body: dict[str, Any]) -> Answer:
        return read_answer(body)

    def usage(self, body: Any) -> Usage | None:
        return parse_usage(body)

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        return rate_limit_headers(headers, body)

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        return classify_error(status, body)

    # ---- streaming (wire.stream_base.StreamingWire) -------------------------------------------------

    def stream_endpoint(self, config: ProviderConfig) -> Endpoint:
        return Endpoint(f"{model_url(config)}:streamGenerateContent?alt=sse", auth_headers(config))

    def stream_body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return self.body(config, messages, params)  # the endpoint streams; the body is the same

    def stream_decoder(
        self, config: ProviderConfig, *, completion_id: str, created: int
    ) -> GeminiStreamDecoder:
        return GeminiStreamDecoder(
            parse_usage,
            classify_error,
            finish_reason,
            blocked_prompt,
            completion_id=completion_id,
            created=created,
            model=config.model.removeprefix("models/"),
        )

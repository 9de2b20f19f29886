"""The Anthropic Messages wire format (provider kind ``anthropic``, docs/contract.md §5).

``POST {base_url}/messages`` with ``x-api-key`` (when a key is configured) and ``anthropic-version:
2023-06-01``; the body is built by ``wire.anthropic_request``. Answers (https://docs.anthropic.com/en/api/messages)
are ``content[]`` blocks with a ``stop_reason`` and ``usage{input_tokens, output_tokens,
cache_creation_input_tokens, cache_read_input_tokens}`` where ``input_tokens`` excludes both cache
counts: prompt_tokens = all three. Errors (https://docs.anthropic.com/en/api/errors):
``{"type": "error", "error": {"type", "message"}}``; 529 ``overloaded_error`` is load across all
customers (``overloaded``: retried, never a quota signal); the three spend forms (a 429 whose
``error.details.error_code`` is ``enforced_spend_limit_reached``, a 400 "You have reached your
specified API usage limits", a 402 ``billing_error``) are ``provider_quota_exhausted`` with a billing
pause. Rate-limit headers (https://docs.anthropic.com/en/api/rate-limits):
``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``, resets
in RFC 3339, plus ``retry-after`` in seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..answers import clamp_count
from ..retry import ErrorType
from ..routing import ProviderConfig
from .anthropic_request import translate
from .anthropic_stream import AnthropicStreamDecoder
from .base import Answer, Endpoint, ErrorVerdict, ParamProblem, Pause, Usage
from .chat_shape import chat_completion, choice, normalized_usage, tool_call
from .openai import RESERVED_PARAMS, provider_message
from .translation import checked_body, message_problems, param_problems

KIND = "anthropic"
API_VERSION = "2023-06-01"
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "model_context_window_exceeded": "length",
}
# Anthropic's own sentence opens the message; anchored, so a 400 whose text quotes the caller's input
# (which may contain these words) never pauses the provider for every team
_SPEND_400 = re.compile(r"\s*you have reached your specified (?:workspace )?api usage limits\b", re.I)
_TOKEN_FAMILIES = ("tokens", "input-tokens", "output-tokens")


def parse_usage(body: Any) -> Usage | None:
    """Normalized usage of a Messages answer: prompt = input + cache writes + cache reads."""
    raw = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(raw, dict):
        return None
    written = clamp_count(raw.get("cache_creation_input_tokens"))
    read = clamp_count(raw.get("cache_read_input_tokens"))
    prompt = clamp_count(raw.get("input_tokens")) + written + read
    return normalized_usage(prompt, clamp_count(raw.get("output_tokens")), read, written)


def _blocks(content: Any) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(joined text, OpenAI tool calls, what was left out) of an answer's content blocks."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    unmapped: list[str] = []
    for i, block in enumerate(content if isinstance(content, list) else []):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and isinstance(block.get("name"), str):
            calls.append(tool_call(str(block.get("id", f"toolu_{i}")), block["name"], block.get("input")))
        else:
            unmapped.append(f"content[{i}]: {kind} block")
    return "".join(texts), calls, unmapped


def finish_reason(stop: Any, has_calls: bool) -> str:
    """The OpenAI finish_reason of a ``stop_reason`` (FINISH_REASONS); one it has no entry for (or
    none): ``tool_calls`` when the answer called tools, else ``stop``."""
    finish = FINISH_REASONS.get(stop) if isinstance(stop, str) else None
    return finish if finish is not None else ("tool_calls" if has_calls else "stop")


def read_answer(body: dict[str, Any]) -> Answer:
    text, calls, unmapped = _blocks(body.get("content"))
    stop = body.get("stop_reason")
    if not isinstance(stop, str) or stop not in FINISH_REASONS:
        unmapped.append(f"stop_reason: {stop!r} has no OpenAI finish_reason")
    finish = finish_reason(stop, bool(calls))
    usage = parse_usage(body)
    response = chat_completion(
        str(body.get("id", "")), str(body.get("model", "")), [choice(0, text, calls, finish)], usage, unmapped
    )
    return Answer(response, body, usage)


def _error(body: Any) -> dict[str, Any]:
    err = body.get("error") if isinstance(body, dict) else None
    return err if isinstance(err, dict) else {}


def _is_spend_limit(status: int, err: dict[str, Any]) -> bool:
    details = err.get("details")
    code = details.get("error_code") if isinstance(details, dict) else None
    if status == 429 and code == "enforced_spend_limit_reached":
        return True
    if status == 400 and isinstance(err.get("message"), str) and _SPEND_400.match(err["message"]):
        return True
    return status == 402 or err.get("type") == "billing_error"


def classify_error(status: int, body: Any) -> ErrorVerdict:
    err = _error(body)
    message = provider_message(status, body)
    if status == 529 or err.get("type") == "overloaded_error":
        return ErrorVerdict(ErrorType.OVERLOADED, message)
    if _is_spend_limit(status, err):
        return ErrorVerdict(ErrorType.PROVIDER_QUOTA_EXHAUSTED, message, Pause("billing", None, message))
    if status == 429:
        return ErrorVerdict(ErrorType.RATE_LIMITED, message)
    if status >= 500:
        return ErrorVerdict(ErrorType.SERVER_ERROR, message)
    return ErrorVerdict(ErrorType.CLIENT_ERROR, message)


_NEVER = datetime.min.replace(tzinfo=UTC)
# what Anthropic sends: UTC, one precision; such times order as strings (no parsing per answer)
_UTC_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _instant(value: str) -> datetime:
    """An RFC 3339 reset as an aware datetime; _NEVER when unreadable or without a zone."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return _NEVER
    return when if when.tzinfo is not None else _NEVER


def _latest(values: list[str]) -> str | None:
    """The reset furthest in the future (the one that binds last); unreadable values are skipped."""
    if len({len(v) for v in values}) == 1 and all(_UTC_TIME.fullmatch(v) for v in values):
        return max(values)
    best = max(values, key=_instant)
    return None if _instant(best) is _NEVER else best


def _fewest(values: list[str]) -> str | None:
    """The smallest remaining count (the limit closest to binding); non-numbers are skipped."""
    numbers = [v for v in values if v.isdigit()]
    return min(numbers, key=int) if numbers else None


_REQUESTS = (
    ("anthropic-ratelimit-requests-reset", "x-ratelimit-reset-requests"),
    ("anthropic-ratelimit-requests-remaining", "x-ratelimit-remaining-requests"),
)
_TOKEN_RESETS = tuple(f"anthropic-ratelimit-{family}-reset" for family in _TOKEN_FAMILIES)
_TOKEN_REMAINING = tuple(f"anthropic-ratelimit-{family}-remaining" for family in _TOKEN_FAMILIES)


def rate_limit_headers(headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
    """``retry-after`` kept; requests-* mapped; the three token families folded into one: the latest
    reset and the smallest remaining (input and output tokens are limited separately, either binds)."""
    out = {"retry-after": headers["retry-after"]} if "retry-after" in headers else {}
    for theirs, ours in _REQUESTS:
        if theirs in headers:
            out[ours] = headers[theirs]
    resets = [headers[h] for h in _TOKEN_RESETS if h in headers]
    latest = _latest(resets) if resets else None
    if latest is not None:
        out["x-ratelimit-reset-tokens"] = latest
    remaining = [headers[h] for h in _TOKEN_REMAINING if h in headers]
    fewest = _fewest(remaining) if remaining else None
    if fewest is not None:
        out["x-ratelimit-remaining-tokens"] = fewest
    return out


class AnthropicWire:
    """The ``anthropic`` kind (implements ``wire.base.WireFormat``)."""

    kind = KIND
    reserved_params = RESERVED_PARAMS

    def endpoint(self, config: ProviderConfig) -> Endpoint:
        headers = {"anthropic-version": API_VERSION}
        if config.api_key:
            headers["x-api-key"] = config.api_key
        return Endpoint(config.base_url.rstrip("/") + "/messages", headers)

    def body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return checked_body(translate, config, messages, params)

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        return param_problems(translate, config, params)

    def check_messages(self, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
        """Message content this kind cannot carry (an audio part, a non-text system prompt …)."""
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
        return self.endpoint(config)

    def stream_body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return {**self.body(config, messages, params), "stream": True}

    def stream_decoder(
        self, config: ProviderConfig, *, completion_id: str, created: int
    ) -> AnthropicStreamDecoder:
        return AnthropicStreamDecoder(
            parse_usage,
            classify_error,
            finish_reason,
            completion_id=completion_id,
            created=created,
            model=config.model,
        )

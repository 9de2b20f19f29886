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
from typing import Any

from ..retry import ErrorType, header_seconds
from ..routing import ProviderConfig
from .anthropic_request import translate
from .base import Answer, Endpoint, ErrorVerdict, ParamProblem, Pause, Usage
from .chat_shape import chat_completion, choice, normalized_usage, tool_call
from .openai import RESERVED_PARAMS, provider_message
from .params import RequestProblems

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
_SPEND_400 = re.compile(r"you have reached your specified .*api usage limits", re.I | re.S)
_TOKEN_FAMILIES = ("tokens", "input-tokens", "output-tokens")


def _without_reserved(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (params or {}).items() if k not in RESERVED_PARAMS}


def parse_usage(body: Any) -> Usage | None:
    """Normalized usage of a Messages answer: prompt = input + cache writes + cache reads."""
    raw = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(raw, dict):
        return None
    fresh = raw.get("input_tokens")
    written, read = raw.get("cache_creation_input_tokens"), raw.get("cache_read_input_tokens")
    prompt = sum(n for n in (fresh, written, read) if isinstance(n, (int, float)) and not isinstance(n, bool))
    return normalized_usage(prompt, raw.get("output_tokens"), read, written)


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


def read_answer(body: dict[str, Any]) -> Answer:
    text, calls, unmapped = _blocks(body.get("content"))
    stop = body.get("stop_reason")
    finish = FINISH_REASONS.get(stop) if isinstance(stop, str) else None
    if finish is None:
        unmapped.append(f"stop_reason: {stop!r} has no OpenAI finish_reason")
        finish = "tool_calls" if calls else "stop"
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
    if status == 400 and isinstance(err.get("message"), str) and _SPEND_400.search(err["message"]):
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


def _latest(values: list[str]) -> str | None:
    """The reset furthest in the future (the one that binds last); unreadable values are skipped."""
    timed = [(header_seconds(v, now=0.0, epoch_allowed=True), v) for v in values]
    readable = [(t, v) for t, v in timed if t is not None]
    return max(readable)[1] if readable else None


def _fewest(values: list[str]) -> str | None:
    """The smallest remaining count (the limit closest to binding); non-numbers are skipped."""
    numbers = [(float(v), v) for v in values if re.fullmatch(r"\s*\d+(\.\d+)?\s*", v)]
    return min(numbers)[1] if numbers else None


def rate_limit_headers(headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
    """``retry-after`` kept; requests-* mapped; the three token families folded into one: the latest
    reset and the smallest remaining (input and output tokens are limited separately, either binds)."""
    out: dict[str, str] = {}
    if "retry-after" in headers:
        out["retry-after"] = headers["retry-after"]
    for part in ("reset", "remaining"):
        requests = headers.get(f"anthropic-ratelimit-requests-{part}")
        if requests is not None:
            out[f"x-ratelimit-{part}-requests"] = requests
        found = [headers[h] for f in _TOKEN_FAMILIES if (h := f"anthropic-ratelimit-{f}-{part}") in headers]
        folded = (_latest if part == "reset" else _fewest)(found)
        if folded is not None:
            out[f"x-ratelimit-{part}-tokens"] = folded
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
        payload, problems = translate(config, messages, _without_reserved(params))
        if problems:  # submission refuses these; never send a request that silently lost a field
            raise RequestProblems(problems)
        return payload

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        return translate(config, [], _without_reserved(params))[1]

    def check_messages(self, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
        """Message content this kind cannot carry (an audio part, a non-text system prompt …)."""
        return translate(config, messages, None)[1]

    def read_answer(self, body: dict[str, Any]) -> Answer:
        return read_answer(body)

    def usage(self, body: Any) -> Usage | None:
        return parse_usage(body)

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        return rate_limit_headers(headers, body)

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        return classify_error(status, body)

"""The OpenAI-compatible wire format (provider kind ``openai``, docs/contract.md §5).

``POST {base_url}/chat/completions`` with ``{"model": provider.model, "messages": …, **params}`` and
``Authorization: Bearer <provider key>`` when one is configured; ``usage`` read from the answer;
``Retry-After`` and ``x-ratelimit-*`` headers kept as they come (they are the engine's vocabulary);
a 429 whose ``error.code`` or ``error.type`` is ``insufficient_quota`` is the account's billing, not
its rate (https://platform.openai.com/docs/guides/error-codes): ``provider_quota_exhausted`` with a
billing pause, never retried; any other 429 → ``rate_limited``, 5xx → ``server_error``, any other
status → ``client_error``, with the provider's JSON error message (sanitised) or ``HTTP n`` as the
message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..answers import MAX_USAGE_TOKENS, clamp_count, sanitize_message
from ..retry import ErrorType
from ..routing import ProviderConfig
from .base import Answer, Endpoint, ErrorVerdict, ParamProblem, Pause, Usage
from .openai_stream import OpenAIStreamDecoder, streaming_body

KIND = "openai"
# The gateway sets these itself ({"model": provider.model, "messages": …, **params}): a caller's value
# would override the provider's model or the messages, and streamed answers are not read. Submission
# (batches.submission) refuses them in an item's params; the body below never takes them.
RESERVED_PARAMS = frozenset({"model", "messages", "stream"})


def without_reserved(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """An item's params without the ones the gateway sets itself (RESERVED_PARAMS)."""
    return {k: v for k, v in (params or {}).items() if k not in RESERVED_PARAMS}


# the response headers an outcome keeps (gateway_engine.retry.rate_limit_wait reads them)
KEEP_HEADERS = (
    "retry-after",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
)


def chat_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


def parse_usage(body: Any) -> Usage | None:
    """The OpenAI-style ``usage`` object with each count clamped to [0, MAX_USAGE_TOKENS], or None;
    ``cached_tokens`` (``prompt_tokens_details.cached_tokens``, part of prompt_tokens) when some."""
    if not isinstance(body, dict) or not isinstance(body.get("usage"), dict):
        return None
    raw = body["usage"]
    prompt, completion = clamp_count(raw.get("prompt_tokens")), clamp_count(raw.get("completion_tokens"))
    total = clamp_count(raw.get("total_tokens")) or prompt + completion
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": min(total, MAX_USAGE_TOKENS),
    }
    details = raw.get("prompt_tokens_details")
    cached = clamp_count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    if cached:
        usage["cached_tokens"] = min(cached, prompt)
    return usage


def error_type_for_status(status_code: int) -> str:
    """The error type of an error answer's status: 429 rate limited, 5xx server, any other client."""
    if status_code == 429:
        return ErrorType.RATE_LIMITED
    if status_code >= 500:
        return ErrorType.SERVER_ERROR
    return ErrorType.CLIENT_ERROR


def is_insufficient_quota(status: int, body: Any) -> bool:
    """A 429 that is the account's billing (``insufficient_quota`` as error.code or error.type)."""
    err = body.get("error") if isinstance(body, dict) else None
    return (
        status == 429 and isinstance(err, dict) and "insufficient_quota" in (err.get("code"), err.get("type"))
    )


def classify_error(status: int, body: Any) -> ErrorVerdict:
    """An OpenAI error answer → its type and message (and a billing pause for insufficient_quota)."""
    message = provider_message(status, body)
    if is_insufficient_quota(status, body):
        return ErrorVerdict(ErrorType.PROVIDER_QUOTA_EXHAUSTED, message, Pause("billing", None, message))
    return ErrorVerdict(error_type_for_status(status), message)


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


class OpenAIWire:
    """The ``openai`` kind (implements ``wire.base.WireFormat``)."""

    kind = KIND
    reserved_params = RESERVED_PARAMS

    def endpoint(self, config: ProviderConfig) -> Endpoint:
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        return Endpoint(chat_url(config.base_url), headers)

    def body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return {"model": config.model, "messages": messages, **without_reserved(params)}

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        # an OpenAI-compatible server takes what it takes: submission refuses only the reserved params
        return []

    def read_answer(self, body: dict[str, Any]) -> Answer:
        return Answer(body, None, parse_usage(body))

    def usage(self, body: Any) -> Usage | None:
        return parse_usage(body)

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        return {h: headers[h] for h in KEEP_HEADERS if h in headers}

    def check_messages(self, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
        return []

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        return classify_error(status, body)

    # ---- streaming (wire.stream_base.StreamingWire) -------------------------------------------------

    def stream_endpoint(self, config: ProviderConfig) -> Endpoint:
        return self.endpoint(config)

    def stream_body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return streaming_body(self.body(config, messages, params), params)

    def stream_decoder(
        self, config: ProviderConfig, *, completion_id: str, created: int
    ) -> OpenAIStreamDecoder:
        return OpenAIStreamDecoder(
            parse_usage, classify_error, completion_id=completion_id, created=created, model=config.model
        )

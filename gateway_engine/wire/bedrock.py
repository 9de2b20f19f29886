"""The Amazon Bedrock wire format (provider kind ``bedrock``): the Converse API, SigV4-signed per request.

``POST {base_url}/model/{modelId}/converse`` (``base_url`` is the runtime endpoint,
``https://bedrock-runtime.{region}.amazonaws.com``; the model id, e.g.
``anthropic.claude-3-haiku-20240307-v1:0`` or an inference profile, is URL-encoded into the path) with
the body of ``wire.bedrock_request``; streaming is ``/converse-stream``, answered in AWS's binary
event stream (``wire.eventstream``, decoded by ``wire.bedrock_stream``). No fixed auth header: each
request is signed (``sign``: gateway_engine/signing.py, service ``bedrock``, the provider's ``region``,
``aws_access_key_id`` and the secret access key kept in the provider's encrypted ``api_key``).

Answers (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html):
``output.message{role, content[{text}|{toolUse}…]}``, ``stopReason``, ``usage{inputTokens,
outputTokens, totalTokens, cacheReadInputTokens, cacheWriteInputTokens}``, ``metrics.latencyMs``.
Errors are ``{"message": "..."}`` with the type in the ``x-amzn-ErrorType`` header; by status
(botocore's service model): ThrottlingException 429 → rate_limited, ModelNotReadyException 429 (the
message says the model is not ready) → overloaded, ServiceUnavailableException 503 → overloaded,
InternalServerException 500 and ModelErrorException 424 → server_error, ModelTimeoutException 408 →
timeout, ValidationException 400, AccessDeniedException 403, ResourceNotFoundException 404 →
client_error; ServiceQuotaExceededException (400, "quota") → provider_quota_exhausted. Bedrock sends no
rate-limit headers and no Retry-After.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ..answers import clamp_count
from ..retry import ErrorType
from ..routing import ProviderConfig
from ..signing import Credentials
from ..signing import sign as sigv4
from .base import Answer, Endpoint, ErrorVerdict, ParamProblem, Usage
from .bedrock_request import translate
from .bedrock_stream import BedrockStreamDecoder
from .chat_shape import chat_completion, choice, normalized_usage, tool_call
from .openai import RESERVED_PARAMS, provider_message
from .translation import checked_body, message_problems, param_problems

KIND = "bedrock"
SERVICE = "bedrock"  # the signing name of bedrock-runtime
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
STATUS_TYPES = {
    408: ErrorType.TIMEOUT,
    424: ErrorType.SERVER_ERROR,
    429: ErrorType.RATE_LIMITED,
    503: ErrorType.OVERLOADED,
}


def finish_reason(reason: Any) -> str:
    return FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"


def parse_usage(body: Any) -> Usage | None:
    """prompt = inputTokens + cache reads + cache writes (Bedrock counts them apart; ALL input here)."""
    raw = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(raw, dict):
        return None
    read, write = clamp_count(raw.get("cacheReadInputTokens")), clamp_count(raw.get("cacheWriteInputTokens"))
    prompt = clamp_count(raw.get("inputTokens")) + read + write
    return normalized_usage(prompt, clamp_count(raw.get("outputTokens")), read, write)


def read_answer(body: dict[str, Any]) -> Answer:
    usage = parse_usage(body)
    output = body.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return Answer(
            None, body, usage, refusal=ErrorVerdict(ErrorType.INVALID_RESPONSE, "answer has no message")
        )
    texts, calls, unmapped = [], [], []
    for j, block in enumerate(content):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append(
                tool_call(str(use.get("toolUseId", f"call_{j}")), str(use.get("name", "")), use.get("input"))
            )
        else:
            unmapped.append(
                f"output.message.content[{j}]: {'/'.join(sorted(block)) if isinstance(block, dict) else 'not an object'}"
            )
    reason = body.get("stopReason")
    if reason not in FINISH_REASONS:
        unmapped.append(f"stopReason: {reason!r} has no OpenAI finish_reason")
    choices = [choice(0, "".join(texts), calls, finish_reason(reason))]
    return Answer(chat_completion(f"chatcmpl-{uuid.uuid4().hex}", "", choices, usage, unmapped), body, usage)


def classify_error(status: int, body: Any) -> ErrorVerdict:
    message = provider_message(status, body)
    lowered = message.lower()
    if status == 429 and "not ready" in lowered:  # ModelNotReadyException: not a quota signal
        return ErrorVerdict(ErrorType.OVERLOADED, message)
    if status == 400 and "quota" in lowered:  # ServiceQuotaExceededException: the account's quota
        return ErrorVerdict(ErrorType.PROVIDER_QUOTA_EXHAUSTED, message)
    if status in STATUS_TYPES:
        return ErrorVerdict(STATUS_TYPES[status], message)
    if status >= 500:
        return ErrorVerdict(ErrorType.SERVER_ERROR, message)
    return ErrorVerdict(ErrorType.CLIENT_ERROR, message)


def rate_limit_headers(headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
    """Bedrock sends no rate-limit headers; a ``retry-after`` is kept should one come."""
    return {"retry-after": headers["retry-after"]} if "retry-after" in headers else {}


def model_url(config: ProviderConfig) -> str:
    return f"{config.base_url.rstrip('/')}/model/{quote(config.model, safe='')}"


class BedrockWire:
    """The ``bedrock`` kind (implements ``wire.base.WireFormat``, ``StreamingWire`` and ``SigningWire``)."""

    kind = KIND
    reserved_params = RESERVED_PARAMS

    def endpoint(self, config: ProviderConfig) -> Endpoint:
        return Endpoint(f"{model_url(config)}/converse", {})

    def body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return checked_body(translate, config, messages, params)

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        return param_problems(translate, config, params)

    def check_messages(self, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
        return message_problems(translate, config, messages)

    def read_answer(self, body: dict[str, Any]) -> Answer:
        return read_answer(body)

    def usage(self, body: Any) -> Usage | None:
        return parse_usage(body)

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        return rate_limit_headers(headers, body)

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        return classify_error(status, body)

    def sign(
        self, config: ProviderConfig, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        credentials = Credentials(config.aws_access_key_id, config.api_key)
        return sigv4(method, url, headers, body, credentials, region=config.region, service=SERVICE)

    # ---- streaming (wire.stream_base.StreamingWire) -------------------------------------------------

    def stream_endpoint(self, config: ProviderConfig) -> Endpoint:
        return Endpoint(f"{model_url(config)}/converse-stream", {})

    def stream_body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return self.body(config, messages, params)  # the endpoint streams; the body is the same

    def stream_decoder(
        self, config: ProviderConfig, *, completion_id: str, created: int
    ) -> BedrockStreamDecoder:
        return BedrockStreamDecoder(
            parse_usage,
            classify_error,
            finish_reason,
            completion_id=completion_id,
            created=created,
            model=config.model,
        )

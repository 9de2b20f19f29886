"""The Azure OpenAI wire format (provider kind ``azure_openai``, docs/contract.md §5).

``POST {base_url}/openai/deployments/{deployment or model}/chat/completions?api-version={api_version}``
with an ``api-key`` header (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference):
OpenAI bodies, except that the deployment in the URL decides the model, so the body names none.
Answers are OpenAI answers (a 200 with ``finish_reason: "content_filter"`` is output filtering: a
normal answer). A 429 carries ``retry-after-ms`` (the limits run over 1–10 s windows, so the
milliseconds matter): it becomes ``retry-after`` in seconds and wins over a whole-second
``retry-after``. An input content-filter refusal is a 400 whose ``error.code`` is ``content_filter``
(https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter): a
``client_error`` saying so; everything else is classified as for kind ``openai``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ..retry import ErrorType
from ..routing import ProviderConfig
from .base import Answer, Endpoint, ErrorVerdict, ParamProblem, Usage
from .openai import KEEP_HEADERS, RESERVED_PARAMS, parse_usage, provider_message, without_reserved
from .openai import classify_error as openai_classify
from .openai_stream import OpenAIStreamDecoder, streaming_body

KIND = "azure_openai"


def deployment_url(config: ProviderConfig) -> str:
    """The chat-completions URL of the provider's deployment; ValueError naming ``api_version`` when
    it is missing (the provider file requires it: the API refuses a request without one)."""
    if not config.api_version:
        raise ValueError(f"api_version: required for provider {config.name!r} (kind {KIND})")
    deployment = quote(config.deployment or config.model, safe="")
    version = quote(config.api_version, safe="")
    return f"{config.base_url.rstrip('/')}/openai/deployments/{deployment}/chat/completions?api-version={version}"


def _seconds(milliseconds: str) -> str | None:
    try:
        value = float(milliseconds)
    except ValueError:
        return None
    if not value >= 0 or value == float("inf"):
        return None
    return f"{value / 1000:.3f}".rstrip("0").rstrip(".")


def rate_limit_headers(headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
    """The OpenAI headers as they come, and ``retry-after-ms`` as ``retry-after`` seconds (it wins)."""
    out = {h: headers[h] for h in KEEP_HEADERS if h in headers}
    precise = _seconds(headers["retry-after-ms"]) if "retry-after-ms" in headers else None
    if precise is not None:
        out["retry-after"] = precise
    return out


def classify_error(status: int, body: Any) -> ErrorVerdict:
    err = body.get("error") if isinstance(body, dict) else None
    if status == 400 and isinstance(err, dict) and err.get("code") == "content_filter":
        message = provider_message(status, body)
        return ErrorVerdict(
            ErrorType.CLIENT_ERROR, f"input refused by the provider's content filter: {message}"
        )
    return openai_classify(status, body)


class AzureOpenAIWire:
    """The ``azure_openai`` kind (implements ``wire.base.WireFormat``)."""

    kind = KIND
    reserved_params = RESERVED_PARAMS

    def endpoint(self, config: ProviderConfig) -> Endpoint:
        headers = {"api-key": config.api_key} if config.api_key else {}
        return Endpoint(deployment_url(config), headers)

    def body(
        self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return {"messages": messages, **without_reserved(params)}

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        # OpenAI bodies: the deployment's model takes what it takes, as for kind openai
        return []

    def check_messages(self, config: ProviderConfig, messages: list[Any]) -> list[ParamProblem]:
        return []

    def read_answer(self, body: dict[str, Any]) -> Answer:
        return Answer(body, None, parse_usage(body))

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
        return streaming_body(self.body(config, messages, params), params)

    def stream_decoder(
        self, config: ProviderConfig, *, completion_id: str, created: int
    ) -> OpenAIStreamDecoder:
        return OpenAIStreamDecoder(
            parse_usage, classify_error, completion_id=completion_id, created=created, model=config.model
        )

"""Embeddings for kinds ``openai`` and ``azure_openai``: OpenAI's own API, so the answer is the answer.

OpenAI (https://platform.openai.com/docs/api-reference/embeddings/create): ``POST {base_url}/embeddings``
with ``{"model": provider.model, "input": …, "dimensions"?, "encoding_format"?, "user"?}`` and
``Authorization: Bearer <key>``. Azure OpenAI
(https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference#embeddings): the deployment's URL
``{base_url}/openai/deployments/{deployment or model}/embeddings?api-version={api_version}`` with an
``api-key`` header; the body names no model (the deployment decides it).

A 2xx whose ``data`` is not a list of one embedding per input is ``invalid_response``; ``usage``
(``prompt_tokens``, ``total_tokens``) is what the provider counted. Errors, rate-limit headers: as the
kind's chat answers (wire.openai, wire.azure_openai).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..items import EmbeddingInput, embedding_inputs
from ..retry import ErrorType
from ..routing import ProviderConfig
from . import azure_openai, openai
from .base import Answer, ErrorVerdict, Usage
from .embeddings_check import EMBEDDINGS_RESERVED
from .embeddings_shape import EmbeddingsRequest, checked


def embeddings_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/embeddings"


def azure_embeddings_url(config: ProviderConfig) -> str:
    """The embeddings URL of the provider's deployment; ValueError naming ``api_version`` when missing."""
    if not config.api_version:
        raise ValueError(f"api_version: required for provider {config.name!r} (kind {config.kind})")
    deployment = quote(config.deployment or config.model, safe="")
    version = quote(config.api_version, safe="")
    return f"{config.base_url.rstrip('/')}/openai/deployments/{deployment}/embeddings?api-version={version}"


def body_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in EMBEDDINGS_RESERVED}


def malformed(body: dict[str, Any], inputs: int) -> str | None:
    """What is wrong with a 2xx embeddings answer (None: a ``data`` list with one embedding per input)."""
    data = body.get("data")
    if not isinstance(data, list):
        return "answer has no data list"
    if len(data) != inputs:
        return f"answer has {len(data)} embeddings for {inputs} inputs"
    if not all(isinstance(d, dict) and isinstance(d.get("embedding"), list | str) for d in data):
        return "answer has an entry without an embedding"
    return None


@dataclass(frozen=True)
class OpenAIEmbeddingsReader:
    """Reads one OpenAI-shaped embeddings answer (``inputs``: how many embeddings it must hold)."""

    inputs: int
    azure: bool = False

    def read_answer(self, body: dict[str, Any]) -> Answer:
        usage = openai.parse_usage(body)
        wrong = malformed(body, self.inputs)
        if wrong is not None:
            return Answer(None, body, usage, refusal=ErrorVerdict(ErrorType.INVALID_RESPONSE, wrong))
        return Answer(body, None, usage)

    def usage(self, body: Any) -> Usage | None:
        return openai.parse_usage(body)

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        if self.azure:
            return azure_openai.rate_limit_headers(headers, body)
        return {h: headers[h] for h in openai.KEEP_HEADERS if h in headers}

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        return (
            azure_openai.classify_error(status, body) if self.azure else openai.classify_error(status, body)
        )


class OpenAIEmbeddings:
    """Kinds ``openai`` and (``azure``) ``azure_openai`` (implements ``wire.embeddings.EmbeddingsWire``):
    the same body but for the model, which Azure's deployment URL names instead."""

    def __init__(self, *, azure: bool = False) -> None:
        self.azure = azure
        self.kind = azure_openai.KIND if azure else openai.KIND

    def request(
        self, config: ProviderConfig, embedding_input: EmbeddingInput, params: Mapping[str, Any]
    ) -> EmbeddingsRequest:
        checked(config, embedding_input, params)
        key = config.api_key
        body: dict[str, Any] = {"input": embedding_input, **body_params(params)}
        if self.azure:
            url, headers = azure_embeddings_url(config), ({"api-key": key} if key else {})
        else:
            url, headers = (
                embeddings_url(config.base_url),
                ({"Authorization": f"Bearer {key}"} if key else {}),
            )
            body = {"model": config.model, **body}
        inputs = len(embedding_inputs(embedding_input))
        return EmbeddingsRequest(url, headers, body, OpenAIEmbeddingsReader(inputs, azure=self.azure), inputs)

"""Embeddings for kind ``gemini``, translated to and from OpenAI's shape (https://ai.google.dev/api/embeddings).

One input: ``POST {base_url}/models/{model}:embedContent`` with ``{"model": "models/{model}", "content":
{"parts": [{"text"}]}, "outputDimensionality"?}``, answered ``{"embedding": {"values": […]}}``. A list:
``:batchEmbedContents`` with ``{"requests": [one such request per input]}`` (at most 100: kinds.py),
answered ``{"embeddings": [{"values": […]}, …]}`` in the order asked. ``dimensions`` becomes
``outputDimensionality``; ``encoding_format: "base64"`` is done here (OpenAI's little-endian float32),
as Gemini answers floats only. Auth and errors as Gemini's chat (wire.gemini: ``x-goog-api-key``,
RESOURCE_EXHAUSTED with RetryInfo, per-day quotas pause the provider).

Usage: these methods report no token counts, so the answer's ``usage`` is the gateway's estimate
(``items.input_tokens``: characters / 4 per input, every element counted) — the reservation is kept
as it was, and docs/providers.md says so; a ``usageMetadata.promptTokenCount``, if an answer carries
one, is used instead. The native answer is kept (``Answer.native``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..answers import clamp_count
from ..items import EmbeddingInput, embedding_inputs, input_tokens
from ..retry import ErrorType
from ..routing import ProviderConfig
from . import gemini
from .base import Answer, ErrorVerdict, Usage
from .chat_shape import normalized_usage
from .embeddings_shape import EmbeddingsRequest, checked, embedding_object, embeddings_answer


def _values(entry: Any) -> list[float] | None:
    values = entry.get("values") if isinstance(entry, dict) else None
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        return None
    return values


@dataclass(frozen=True)
class GeminiEmbeddingsReader:
    """Reads one Gemini embeddings answer into OpenAI's shape."""

    model: str
    inputs: int
    single: bool  # embedContent (one input) rather than batchEmbedContents
    estimate: int  # the input's token estimate: the usage when the answer reports none
    encoding_format: str = "float"

    def vectors(self, body: dict[str, Any]) -> list[list[float]] | str:
        """The answer's vectors in input order, or what is wrong with it."""
        entries = [body.get("embedding")] if self.single else body.get("embeddings")
        if not isinstance(entries, list) or len(entries) != self.inputs:
            found = len(entries) if isinstance(entries, list) else "no"
            return f"answer has {found} embeddings for {self.inputs} inputs"
        vectors = [_values(e) for e in entries]
        if any(v is None for v in vectors):
            return "answer has an embedding without numeric values"
        return [v for v in vectors if v is not None]

    def counted(self, body: Any) -> Usage:
        """The answer's ``usageMetadata.promptTokenCount`` if it has one, else the estimate."""
        meta = body.get("usageMetadata") if isinstance(body, dict) else None
        reported = clamp_count(meta.get("promptTokenCount")) if isinstance(meta, dict) else 0
        return normalized_usage(reported or self.estimate, 0)

    def usage(self, body: Any) -> Usage | None:
        """An answer with embeddings or a reported count: ``counted``; an error answer: None (unbilled)."""
        if isinstance(body, dict) and ({"embedding", "embeddings", "usageMetadata"} & body.keys()):
            return self.counted(body)
        return None

    def read_answer(self, body: dict[str, Any]) -> Answer:
        usage = self.counted(body)
        vectors = self.vectors(body)
        if isinstance(vectors, str):
            return Answer(None, body, usage, refusal=ErrorVerdict(ErrorType.INVALID_RESPONSE, vectors))
        data = [embedding_object(i, v, self.encoding_format) for i, v in enumerate(vectors)]
        return Answer(embeddings_answer(data, self.model, usage["prompt_tokens"]), body, usage)

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        return gemini.rate_limit_headers(headers, body)

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        return gemini.classify_error(status, body)


class GeminiEmbeddings:
    """Kind ``gemini`` (implements ``wire.embeddings.EmbeddingsWire``)."""

    kind = gemini.KIND

    def request(
        self, config: ProviderConfig, embedding_input: EmbeddingInput, params: Mapping[str, Any]
    ) -> EmbeddingsRequest:
        checked(config, embedding_input, params)
        model = config.model.removeprefix("models/")
        texts = [str(one) for one in embedding_inputs(embedding_input)]  # texts: checked() refuses tokens
        one: dict[str, Any] = {"model": f"models/{model}"}
        if "dimensions" in params:
            one["outputDimensionality"] = params["dimensions"]
        requests = [{**one, "content": {"parts": [{"text": text}]}} for text in texts]
        single = isinstance(embedding_input, str)
        method, body = (
            ("embedContent", requests[0]) if single else ("batchEmbedContents", {"requests": requests})
        )
        reader = GeminiEmbeddingsReader(
            model,
            len(texts),
            single,
            input_tokens(embedding_input),
            str(params.get("encoding_format", "float")),
        )
        url = f"{gemini.model_url(config)}:{method}"
        return EmbeddingsRequest(url, gemini.auth_headers(config), body, reader, len(texts))

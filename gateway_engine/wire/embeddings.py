"""The embeddings request family (``endpoints.WIRE_FAMILY[item.endpoint] == "embeddings"``): per kind,
how an embeddings item becomes one HTTP request and how its answer becomes OpenAI's embeddings answer
``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage":
{"prompt_tokens", "total_tokens"}}``.

``embeddings_for_kind(kind)`` is the one place it is chosen, beside ``wire.for_kind`` for chat: kinds
``openai`` and ``azure_openai`` natively (``wire.openai_embeddings``), ``gemini`` translated
(``wire.gemini_embeddings``: ``embedContent`` / ``batchEmbedContents``). A kind whose descriptor has no
``embeddings`` (kinds.py: anthropic, bedrock) has no entry: ``NoEmbeddings`` names it and says why —
never spoken as OpenAI. Streaming is not offered for embeddings (the OpenAI API has none).

``EmbeddingsWire.request`` checks the item again (``embeddings_check``, what submission checked) and
returns an ``EmbeddingsRequest``: URL, headers (auth), body and the ``reader`` of its answer (an
``AnswerReading``: a translated answer needs the request's inputs, model and encoding). Errors are
classified like the kind's chat errors (429 → rate_limited, 5xx → server_error, other 4xx →
client_error; Gemini's and Azure's own rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..items import EmbeddingInput
from ..kinds import KINDS
from ..routing import ProviderConfig
from .embeddings_check import no_embeddings
from .embeddings_shape import EmbeddingsRequest
from .gemini_embeddings import GeminiEmbeddings
from .openai_embeddings import OpenAIEmbeddings


class NoEmbeddings(ValueError):
    """A provider whose kind serves no embeddings (kinds.py ``embeddings`` None): the message names the
    provider, the kind and why."""


class EmbeddingsWire(Protocol):
    """One kind's embeddings API (no I/O, no state)."""

    @property
    def kind(self) -> str: ...

    def request(
        self, config: ProviderConfig, embedding_input: EmbeddingInput, params: Mapping[str, Any]
    ) -> EmbeddingsRequest:
        """The request for one embeddings item; RequestProblems when the item breaks the kind's rules
        (submission refuses those first)."""
        ...


_WIRES: tuple[EmbeddingsWire, ...] = (OpenAIEmbeddings(), OpenAIEmbeddings(azure=True), GeminiEmbeddings())
_EMBEDDINGS: dict[str, EmbeddingsWire] = {w.kind: w for w in _WIRES}
EMBEDDINGS_WIRE_KINDS: tuple[str, ...] = tuple(sorted(_EMBEDDINGS))


def embeddings_for_kind(config: ProviderConfig) -> EmbeddingsWire:
    """The embeddings API of ``config``'s kind; NoEmbeddings naming the provider, the kind and why when
    its kind serves none."""
    descriptor = KINDS.get(config.kind)
    wire = _EMBEDDINGS.get(config.kind)
    if descriptor is None or descriptor.embeddings is None or wire is None:
        raise NoEmbeddings(no_embeddings(config))
    return wire

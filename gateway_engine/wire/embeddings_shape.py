"""The parts every kind's embeddings wire shares (wire.embeddings): the request as sent, the check before
a body is built, and OpenAI's embeddings answer (``embedding_object``, ``embeddings_answer``; ``encoded``
is OpenAI's base64 form: little-endian float32)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..items import EmbeddingInput
from ..routing import ProviderConfig
from .base import AnswerReading
from .embeddings_check import check_embeddings
from .params import RequestProblems

# a bound on one input's embedding in an answer (3,072 floats as JSON text): the answer cap of an
# embeddings request is this per input, or the engine's cap if larger (gateway_engine.http)
ANSWER_BYTES_PER_INPUT = 3072 * 26


@dataclass(frozen=True)
class EmbeddingsRequest:
    """One embeddings call as sent: where, with which headers (auth included), the JSON body, and what
    reads its answer."""

    url: str
    headers: Mapping[str, str]
    body: dict[str, Any]
    reader: AnswerReading
    inputs: int  # how many inputs it carries (the answer cap, the count an answer must have)


def checked(config: ProviderConfig, embedding_input: EmbeddingInput, params: Mapping[str, Any]) -> None:
    """Raise RequestProblems when ``config`` refuses the item (never send what submission refuses)."""
    problems = check_embeddings(config, embedding_input, params)
    if problems:
        raise RequestProblems(problems)


def encoded(vector: Sequence[float]) -> str:
    """A vector as OpenAI's ``encoding_format: "base64"`` gives it: little-endian float32, base64."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def embedding_object(index: int, vector: Sequence[float], encoding_format: str) -> dict[str, Any]:
    value: Any = encoded(vector) if encoding_format == "base64" else list(vector)
    return {"object": "embedding", "index": index, "embedding": value}


def embeddings_answer(data: list[dict[str, Any]], model: str, prompt_tokens: int) -> dict[str, Any]:
    """OpenAI's embeddings answer around ``data`` (``embedding_object`` each)."""
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}

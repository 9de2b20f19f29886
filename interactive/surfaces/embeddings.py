"""``POST /v1/embeddings``: OpenAI's embeddings request (``model``, ``input`` a string, a list of strings
or OpenAI's token arrays, ``dimensions``, ``encoding_format``, ``user``) as an embeddings item — checked
by the batch item rules like any item: each reachable provider's kind (one without embeddings refused
naming it), its params and its per-request input limits —, the answer as it comes (the wire formats
give OpenAI's embeddings object for every kind), errors in OpenAI's shape. Never streamed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpResponse

from gateway_engine.endpoints import EMBEDDINGS

from ..errors import CallError
from .base import Answered, ChatRequest, StreamWriter

# OpenAI's embeddings request: what is not the model or the input is an item param
REQUEST_FIELDS = ("model", "input", "dimensions", "encoding_format", "user")
PARAMS = frozenset(REQUEST_FIELDS) - {"model", "input"}


class EmbeddingsSurface:
    endpoint = EMBEDDINGS
    id_prefix = "emb-"

    def chat_request(self, body: dict[str, Any]) -> ChatRequest:
        """The embeddings item's input and params (no messages), or OpenAI's refusal of the shape: an
        unknown argument, no input, a stream."""
        for key in body:
            if key not in REQUEST_FIELDS:
                what = "streaming is not offered for embeddings" if key == "stream" else "unknown parameter"
                raise CallError(400, f"{key}: {what}; /v1/embeddings takes {', '.join(REQUEST_FIELDS)}",
                                param=key, code="unknown_parameter")  # fmt: skip
        if "input" not in body:
            raise CallError(400, "input: required, a string or a list of strings", param="input",
                            code="missing_required_parameter")  # fmt: skip
        params = {k: v for k, v in body.items() if k in PARAMS}
        return ChatRequest([], params, input=body["input"])

    def param(self, chat_field: str) -> str:
        return chat_field

    def answer(self, answered: Answered) -> dict[str, Any]:
        return dict(answered.chat)

    def error_response(self, error: CallError) -> HttpResponse:
        return error.response()

    def stream_writer(self, call_id: str, model: str, echo: Mapping[str, Any]) -> StreamWriter:
        raise CallError(400, "stream: streaming is not offered for embeddings", param="stream",
                        code="unknown_parameter")  # fmt: skip


EMBEDDINGS_SURFACE = EmbeddingsSurface()

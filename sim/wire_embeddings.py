"""Embeddings, validated as the real APIs do and answered with deterministic vectors.

OpenAI ``POST /{name}/v1/embeddings`` (https://platform.openai.com/docs/api-reference/embeddings/create)
and Azure ``POST /{name}/openai/deployments/{deployment}/embeddings?api-version=…`` take ``{"input",
"model", "dimensions"?, "encoding_format"?, "user"?}``: ``input`` a non-empty string or a list (at most
2,048) of non-empty strings — else OpenAI's ``'$.input' is invalid. Please check the API reference`` —
each input at most 8,192 tokens (``This model's maximum context length is 8192 tokens, however you
requested …``), 300,000 summed (``Requested N tokens, max 300000 tokens per request``, type and code
``max_tokens_per_request``); an unknown argument is ``Unrecognized request argument supplied: x``; a
``text-embedding-ada-002`` model refuses ``dimensions`` (``This model does not support specifying
dimensions.``). The OpenAI route needs ``model`` and it must be the provider's (else 404
``model_not_found``); Azure's deployment decides the model.

Gemini ``POST /{name}/v1beta/models/{model}:embedContent`` (``{"model"?, "content": {"parts": [{"text"}]},
"taskType"?, "title"?, "outputDimensionality"?}``) and ``:batchEmbedContents`` (``{"requests": [such,
each naming the URL's model]}``, at most 100: ``* BatchEmbedContentsRequest.requests: at most 100 requests
can be batched``) (https://ai.google.dev/api/embeddings); answers ``{"embedding": {"values"}}`` /
``{"embeddings": [{"values"}]}`` with no token counts.

Vectors: derived from a hash of the model and the text (SHAKE-256), so the same text gives the same
vector on every run and every provider of one model; ``dimensions`` / ``outputDimensionality`` take a
prefix of the model's native vector, then every vector is unit-normalised; ``encoding_format: "base64"``
is little-endian float32, as OpenAI sends it. Tokens: ceil(characters / 4) per input (at least 1),
summed — the TPM charge (no completion) and the usage reported.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct

from sim import wire_gemini as gemini
from sim import wire_openai as openai
from sim.wire_common import Call, Reply, Usage, is_int

OPENAI_KEYS = ("input", "model", "dimensions", "encoding_format", "user")
GEMINI_KEYS = ("model", "content", "task_type", "title", "output_dimensionality")
MAX_INPUTS = 2048
MAX_INPUT_TOKENS = 8192
MAX_REQUEST_TOKENS = 300_000
GEMINI_MAX_REQUESTS = 100
GEMINI_MAX_INPUT_TOKENS = 2048
GEMINI_MAX_DIMENSIONS = 3072
GEMINI_METHODS = ("embedContent", "batchEmbedContents")
TASK_TYPES = ("TASK_TYPE_UNSPECIFIED", "RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY",
              "CLASSIFICATION", "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION",
              "CODE_RETRIEVAL_QUERY")  # fmt: skip
INPUT_INVALID = (
    "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
)


def native_dimensions(model: str) -> int:
    """The size of a model's own vectors (what ``dimensions`` may shorten)."""
    if "3-large" in model or model.startswith("gemini-embedding"):
        return 3072
    if model.startswith("text-embedding-004") or model.startswith("embedding-"):
        return 768
    return 1536


def text_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def embedding_tokens(texts: list[str]) -> int:
    """The tokens an embeddings request is charged and reports: every input counted on its own."""
    return sum(text_tokens(t) for t in texts)


def vector(model: str, text: str, dimensions: int) -> list[float]:
    """The deterministic unit vector of ``text`` under ``model`` (a prefix of its native vector)."""
    raw = hashlib.shake_256(f"{model}\x00{text}".encode()).digest(4 * dimensions)
    values = [v / 4294967295.0 - 0.5 for v in struct.unpack(f"<{dimensions}I", raw)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def encoded(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")


# ---- OpenAI and Azure --------------------------------------------------------------------------------


def _tokens_text(tokens: list[int]) -> str:
    """A token array as a text of 4 characters per token: its tokens count exactly, its vector is its own."""
    return "".join(f"{t % 10000:04d}" for t in tokens)


def _openai_inputs(value) -> list[str] | None:
    """The input's texts, or None when OpenAI would call it invalid (a token array: ``_tokens_text``)."""
    if isinstance(value, str):
        return [value] if value else None
    if not isinstance(value, list) or not value or len(value) > MAX_INPUTS:
        return None
    if all(is_int(t) and t >= 0 for t in value):  # one token array
        return [_tokens_text(value)]
    texts = []
    for one in value:
        if isinstance(one, str) and one:
            texts.append(one)
        elif isinstance(one, list) and one and all(is_int(t) and t >= 0 for t in one):
            texts.append(_tokens_text(one))
        else:
            return None
    return texts


def _openai_params(body: dict, model: str) -> Reply | None:
    dims = body.get("dimensions")
    if dims is not None:
        if not is_int(dims) or dims < 1:
            return openai.invalid(f"Invalid value for 'dimensions' = {dims}. Must be a positive integer.",
                                  "dimensions", "invalid_value")  # fmt: skip
        if "ada-002" in model:
            return openai.invalid("This model does not support specifying dimensions.", "dimensions")
        if dims > native_dimensions(model):
            return openai.invalid(f"Invalid value for 'dimensions' = {dims}. Must be less than or equal to "
                                  f"{native_dimensions(model)}.", "dimensions", "invalid_value")  # fmt: skip
    fmt = body.get("encoding_format")
    if fmt is not None and fmt not in ("float", "base64"):
        return openai.invalid(f"Invalid value: '{fmt}'. Supported values are: 'float' and 'base64'.",
                              "encoding_format", "invalid_value")  # fmt: skip
    if body.get("user") is not None and not isinstance(body["user"], str):
        return openai.invalid("Invalid type for 'user': expected a string.", "user", "invalid_type")
    return None


def validate_openai(body, model: str, *, azure: bool = False) -> Reply | None:
    """What the OpenAI (or Azure) embeddings API refuses in ``body``; ``model``: the provider's."""
    if not isinstance(body, dict):
        return openai.invalid("Request body must be a JSON object.")
    for key in body:
        if key not in OPENAI_KEYS:
            return openai.invalid(f"Unrecognized request argument supplied: {key}")
    if "input" not in body:
        return openai.invalid("'input' is a required property", "input")
    if not azure:
        if not isinstance(body.get("model"), str) or not body["model"]:
            return openai.invalid("you must provide a model parameter", "model")
        if body["model"] != model:
            reply = Reply(404, openai.error_body(f"The model `{body['model']}` does not exist or you do not "
                                                 f"have access to it.", "invalid_request_error",
                                                 "model_not_found"))  # fmt: skip
            reply.rejected = "shape"
            return reply
    texts = _openai_inputs(body["input"])
    if texts is None:
        return openai.invalid(INPUT_INVALID)
    for text in texts:
        if text_tokens(text) > MAX_INPUT_TOKENS:
            n = text_tokens(text)
            return openai.invalid(f"This model's maximum context length is {MAX_INPUT_TOKENS} tokens, however "
                                  f"you requested {n} tokens ({n} in your prompt; 0 for the completion). Please "
                                  f"reduce your prompt; or completion length.")  # fmt: skip
    total = embedding_tokens(texts)
    if total > MAX_REQUEST_TOKENS:
        reply = Reply(400, openai.error_body(f"Requested {total} tokens, max {MAX_REQUEST_TOKENS} tokens per "
                                             f"request", "max_tokens_per_request", "max_tokens_per_request"))  # fmt: skip
        reply.rejected = "shape"
        return reply
    return _openai_params(body, model)


def openai_call(body: dict, model: str) -> Call:
    texts = _openai_inputs(body["input"]) or []
    return Call(texts=texts, last_text=texts[-1] if texts else "", max_tokens=0, model=model,
                endpoint="embeddings", dimensions=body.get("dimensions"),
                encoding_format=body.get("encoding_format") or "float")  # fmt: skip


def openai_answer(call: Call, usage: Usage) -> dict:
    dims = call.dimensions or native_dimensions(call.model)
    data = []
    for i, text in enumerate(call.texts):
        values = vector(call.model, text, dims)
        data.append({"object": "embedding", "index": i,
                     "embedding": encoded(values) if call.encoding_format == "base64" else values})  # fmt: skip
    return {"object": "list", "data": data, "model": call.model,
            "usage": {"prompt_tokens": usage.prompt, "total_tokens": usage.prompt}}  # fmt: skip


# ---- Gemini ------------------------------------------------------------------------------------------


def _gemini_one(raw, at: str, pre: str, model: str) -> tuple[str, int | None] | Reply:
    """One EmbedContentRequest → (its text, its outputDimensionality), or the API's refusal."""
    if not isinstance(raw, dict):
        return gemini.invalid(f"Invalid value at '{at}' (type.googleapis.com/google.ai.generativelanguage."
                              f"v1beta.EmbedContentRequest), {raw!r}")  # fmt: skip
    one, bad = gemini.fields(raw, GEMINI_KEYS)
    if bad:
        return gemini.unknown_name(bad, at or None)
    if "model" in one and one["model"] != f"models/{model}":
        return gemini.invalid(f"* {pre}.model: Model in the request ({one['model']}) does not match the model "
                              f"in the URL (models/{model}).\n")  # fmt: skip
    content = one.get("content")
    texts = [p.get("text") for p in content.get("parts", [])] if isinstance(content, dict) else []
    if not texts or not all(isinstance(t, str) for t in texts) or not "".join(texts):
        return gemini.invalid(f"* {pre}.content: contents is not specified\n")
    text = "".join(texts)
    if text_tokens(text) > GEMINI_MAX_INPUT_TOKENS:
        return gemini.invalid(f"The input token count ({text_tokens(text)}) exceeds the maximum number of "
                              f"tokens allowed ({GEMINI_MAX_INPUT_TOKENS}).")  # fmt: skip
    if "task_type" in one and one["task_type"] not in TASK_TYPES:
        return gemini.invalid(f"Invalid value at '{at + '.' if at else ''}task_type' "
                              f"(type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), "
                              f"\"{one['task_type']}\"")  # fmt: skip
    dims = one.get("output_dimensionality")
    if dims is not None and (not is_int(dims) or not 1 <= dims <= GEMINI_MAX_DIMENSIONS):
        return gemini.invalid(f"* {pre}.output_dimensionality: must be between 1 and {GEMINI_MAX_DIMENSIONS}, "
                              f"got {dims!r}\n")  # fmt: skip
    return text, dims


def gemini_parse(body, method: str, model: str) -> Call | Reply:
    """``body`` of ``:embedContent`` / ``:batchEmbedContents`` as a Call, or the API's refusal."""
    if not isinstance(body, dict):
        return gemini.invalid("Invalid JSON payload received. Expected an object.")
    if method == "embedContent":
        found = [_gemini_one(body, "", "EmbedContentRequest", model)]
    else:
        extra = next((k for k in body if k != "requests"), None)
        if extra is not None:
            return gemini.unknown_name(extra, None)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return gemini.invalid("* BatchEmbedContentsRequest.requests: requests must not be empty\n")
        if len(requests) > GEMINI_MAX_REQUESTS:
            return gemini.invalid(
                "* BatchEmbedContentsRequest.requests: at most 100 requests can be batched\n"
            )
        found = [_gemini_one(r, f"requests[{i}]", f"BatchEmbedContentsRequest.requests[{i}]", model)
                 for i, r in enumerate(requests)]  # fmt: skip
    refusal = next((f for f in found if isinstance(f, Reply)), None)
    if refusal is not None:
        return refusal
    pairs = [f for f in found if isinstance(f, tuple)]
    texts = [t for t, _ in pairs]
    return Call(texts=texts, last_text=texts[-1], max_tokens=0, model=model, endpoint="embeddings",
                dimensions_each=[d for _, d in pairs], single=method == "embedContent")  # fmt: skip


def gemini_answer(call: Call) -> dict:
    native = native_dimensions(call.model)
    dims = call.dimensions_each or [None] * len(call.texts)
    values = [{"values": vector(call.model, t, d or native)} for t, d in zip(call.texts, dims, strict=True)]
    return {"embedding": values[0]} if call.single else {"embeddings": values}

"""What an embeddings item may ask of a provider, per kind: whether the kind serves embeddings at all
(``kinds.KINDS[kind].embeddings``), the params it takes and the published per-request input limits —
each problem a ``ParamProblem`` naming the field and the provider, checked at submission
(batches.submission.reach) and again before a request is built (wire.embeddings), so the check and
the request sent never disagree.

Params (the OpenAI embeddings request's): ``dimensions`` (a positive integer, at most the kind's
``max_dimensions``), ``encoding_format`` (``float`` or ``base64``), ``user`` (a string; kinds openai
and azure_openai only: Gemini has no such field). ``model`` and ``input`` are the gateway's own
(``EMBEDDINGS_RESERVED``). Limits (``EmbeddingsApi``): inputs per request, tokens per input, tokens
summed over the request — counted with the engine's estimate (``items.text_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..items import text_tokens
from ..kinds import KINDS, EmbeddingsApi, embeddings_api, embeddings_kinds
from ..routing import ProviderConfig
from .base import ParamProblem
from .params import Spec, check, integer, problem, text

# set by the gateway: the provider's model, the item's input
EMBEDDINGS_RESERVED = frozenset({"model", "input"})
ENCODING_FORMATS = ("float", "base64")
# kinds whose request carries ``user`` (Gemini's embedContent has no such field)
_USER_KINDS = frozenset({"openai", "azure_openai"})


def encoding_format(value: Any) -> str | None:
    return None if value in ENCODING_FORMATS else f"{value!r} is not one of {', '.join(ENCODING_FORMATS)}"


def param_specs(kind: str, api: EmbeddingsApi) -> dict[str, Spec]:
    """The embeddings params kind ``kind`` takes, with their specs."""
    specs: dict[str, Spec] = {
        "dimensions": integer(1, api.max_dimensions),
        "encoding_format": encoding_format,
    }
    if kind in _USER_KINDS:
        specs["user"] = text
    return specs


def no_embeddings(config: ProviderConfig) -> str:
    """The refusal of an embeddings item for a provider whose kind serves none (naming both and why)."""
    descriptor_why = _why(config.kind)
    return (
        f"provider {config.name!r} (kind {config.kind}) serves no embeddings: {descriptor_why}; "
        f"kinds with embeddings: {', '.join(embeddings_kinds())}"
    )


def _why(kind: str) -> str:
    descriptor = KINDS.get(kind)
    return (descriptor.why_no_embeddings if descriptor is not None else "") or "no embeddings API"


def check_params(config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
    """Every param of an embeddings item ``config``'s kind cannot take ([] when the kind serves no
    embeddings: ``no_embeddings`` says that once)."""
    api = embeddings_api(config.kind)
    if api is None:
        return []
    rest = {k: v for k, v in params.items() if k not in EMBEDDINGS_RESERVED}  # submission refuses those
    return check(config, rest, param_specs(config.kind, api))


def input_problems(config: ProviderConfig, embedding_input: str | list[str]) -> list[ParamProblem]:
    """The provider's per-request input limits the input breaks: more inputs than one request takes,
    an input over the tokens one may have (naming ``input[i]``), more tokens summed than a request may
    carry."""
    api = embeddings_api(config.kind)
    if api is None:
        return []
    texts = [embedding_input] if isinstance(embedding_input, str) else embedding_input
    found: list[ParamProblem] = []
    if len(texts) > api.max_inputs:
        found.append(
            problem(config, "input", f"{len(texts)} inputs, more than the {api.max_inputs} of one request")
        )
    total = 0
    for i, one in enumerate(texts):
        tokens = text_tokens(one)
        total += tokens
        if tokens > api.max_input_tokens and len(found) < 5:
            where = "input" if isinstance(embedding_input, str) else f"input[{i}]"
            found.append(
                problem(
                    config, where, f"about {tokens} tokens, more than the {api.max_input_tokens} of one input"
                )
            )
    if api.max_request_tokens is not None and total > api.max_request_tokens:
        found.append(
            problem(
                config,
                "input",
                f"about {total} tokens in all, more than the {api.max_request_tokens} of one request",
            )
        )
    return found


def check_embeddings(
    config: ProviderConfig, embedding_input: str | list[str], params: Mapping[str, Any]
) -> list[ParamProblem]:
    """Everything ``config`` refuses in an embeddings item: its params and its input's limits."""
    return check_params(config, params) + input_problems(config, embedding_input)

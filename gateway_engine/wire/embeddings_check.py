"""What an embeddings item may ask of a provider, per kind: whether the kind serves embeddings at all
(``kinds.KINDS[kind].embeddings``), the params it takes and the published per-request input limits —
each problem a ``ParamProblem`` naming the field and the provider, checked at submission
(batches.submission.reach) and again before a request is built (wire.embeddings), so the check and
the request sent never disagree.

Params (the OpenAI embeddings request's): ``dimensions`` (a positive integer, at most the kind's
``max_dimensions``), ``encoding_format`` (``float`` or ``base64``), ``user`` (a string, where the kind's
``EmbeddingsApi.takes_user``; Gemini has no such field); token arrays as input where it
``takes_tokens``. ``model`` and ``input`` are the gateway's own (``EMBEDDINGS_RESERVED``). Limits (``EmbeddingsApi``): inputs per request, tokens per input, tokens
summed over the request — counted with the engine's estimate (``items.text_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..item_shape import token_array
from ..items import EmbeddingInput, embedding_inputs, one_input_tokens
from ..kinds import KINDS, EmbeddingsApi, embeddings_api, embeddings_kinds
from ..routing import ProviderConfig
from .base import ParamProblem
from .params import Spec, check, integer, problem, text

# set by the gateway: the provider's model, the item's input
EMBEDDINGS_RESERVED = frozenset({"model", "input"})
ENCODING_FORMATS = ("float", "base64")


def encoding_format(value: Any) -> str | None:
    return None if value in ENCODING_FORMATS else f"{value!r} is not one of {', '.join(ENCODING_FORMATS)}"


def param_specs(api: EmbeddingsApi) -> dict[str, Spec]:
    """The embeddings params a kind with embeddings API ``api`` takes, with their specs."""
    specs: dict[str, Spec] = {
        "dimensions": integer(1, api.max_dimensions),
        "encoding_format": encoding_format,
    }
    if api.takes_user:
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
    return check(config, rest, param_specs(api))


def input_problems(config: ProviderConfig, embedding_input: EmbeddingInput) -> list[ParamProblem]:
    """The provider's per-request input limits the input breaks: more inputs than one request takes,
    an input over the tokens one may have (naming ``input[i]``), more tokens summed than a request may
    carry; token arrays for a kind that takes text only."""
    api = embeddings_api(config.kind)
    if api is None:
        return []
    inputs = embedding_inputs(embedding_input)
    single = isinstance(embedding_input, str) or token_array(embedding_input)  # one input, named "input"
    found: list[ParamProblem] = []
    if not api.takes_tokens and any(not isinstance(one, str) for one in inputs):
        found.append(problem(config, "input", "token arrays are not taken (give the texts)"))
    if len(inputs) > api.max_inputs:
        found.append(
            problem(config, "input", f"{len(inputs)} inputs, more than the {api.max_inputs} of one request")
        )
    total = 0
    for i, one in enumerate(inputs):
        tokens = one_input_tokens(one)
        total += tokens
        if tokens > api.max_input_tokens and len(found) < 5:
            where = "input" if single else f"input[{i}]"
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
    config: ProviderConfig, embedding_input: EmbeddingInput, params: Mapping[str, Any]
) -> list[ParamProblem]:
    """Everything ``config`` refuses in an embeddings item: its params and its input's limits."""
    return check_params(config, params) + input_problems(config, embedding_input)

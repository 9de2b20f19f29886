"""Provider kinds: one descriptor per kind, read by every surface that treats kinds differently.

Before, what a kind is lived in side tables — six in provider_file.py (the kinds, which follow remaining
headers, kind-only fields, which have a batch API and its limits, the kind's defaults), the header
meanings in remaining.py, and the batch-API client choice in batch_api/client.py (any kind but
anthropic silently got the OpenAI client). Forgetting one of them (the header kinds, say) silently
turned a feature off. Now:

    provider_file.py   PROVIDER_KINDS, REMAINING_HEADER_KINDS, KIND_ONLY_FIELDS, BATCH_API_KINDS,
                       BATCH_KIND_LIMITS, KIND_DEFAULTS: derived from KINDS; ``kind_problems`` reads
                       each kind's ``required_fields``, ``max_burst_seconds`` and
                       ``batch_api.required_fields`` (no kind branch)
    remaining.py       HEADER_SEMANTICS: each kind's ``headers`` (``token_rounding`` included)
    batch_api/client   ``for_target``: each kind's ``batch_api.protocol`` (a kind without one is refused)
    provider_batches   a line's ``model``: ``batch_api.line_model``
    http.py / http_stream.py
                       ``signed``: each request is signed by the wire format (``sign``, e.g. SigV4) after
                       its body is built; ``framing``: how a stream is cut into events (SSE, or AWS's
                       binary eventstream) and the content type a stream must have
    providers.models   the model's choices and check constraints: PROVIDER_KINDS, ``complete_kinds``

What still names a kind on its own: its wire module (gateway_engine/wire/, ``for_kind``), the simulator's
model of it (sim/), and a migration when the list of kinds or their fields change (the model's choices
and constraints). tests/engine/test_kinds.py fails when a kind is half-registered: a descriptor without
a wire module or a simulator, a wire whose signing or framing disagrees with its descriptor, model
choices or constraints the migrations do not have. A value-type module: it imports nothing of the
project.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# what a kind's remaining-quota headers mean, per dimension (remaining.py reads them)
UNTIL_RESET = "until_reset"  # left until the reset the answer gives: followed
PER_MINUTE = "per_minute"  # left of a per-minute limit, no reset sent: followed over the next 60 s
SHORT_WINDOW = "short_window"  # a count of the provider's current short window: not followed
NONE = "none"  # no such headers
FOLLOWED = frozenset({UNTIL_RESET, PER_MINUTE})

# how a kind's stream is cut into events (gateway_engine/wire/framing.py): Server-Sent Events, or AWS's
# binary application/vnd.amazon.eventstream (Bedrock ConverseStream)
SSE = "sse"
AWS_EVENTSTREAM = "aws_eventstream"
FRAMINGS = (SSE, AWS_EVENTSTREAM)

AZURE_KIND = "azure_openai"
# Azure enforces its RPM/TPM over 1–10 s windows: a bucket holding more than one second of quota would
# send a burst the provider answers with 429s
AZURE_MAX_BURST_SECONDS = 1.0


@dataclass(frozen=True)
class KindHeaders:
    """What a kind's remaining-quota headers mean, per dimension (one of the constants above)."""

    requests: str
    tokens: str
    source: str  # where the meaning is documented
    token_rounding: int = 0  # the provider rounds its token counts: remaining taken this much lower

    @property
    def followed(self) -> bool:
        return self.requests in FOLLOWED or self.tokens in FOLLOWED


@dataclass(frozen=True)
class BatchApi:
    """A kind's own batch API: the protocol family its client speaks (batch_api/), and the published
    limits of one batch."""

    protocol: str  # "openai" (files + /batches; Azure too) or "anthropic" (message batches)
    max_requests: int
    max_bytes: int
    # what a line's body names as its model: "model" (the provider's model, if the body has none),
    # "deployment" (Azure: the Global-Batch deployment), "" (the line names none: Anthropic's params)
    line_model: str = "model"
    # provider fields required once batch_api is on -> what the field is (said in the refusal)
    required_fields: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # the item endpoints (gateway_engine.endpoints) its lines can carry: chat everywhere; OpenAI's
    # Batch API also embeddings (platform.openai.com/docs/api-reference/batch/create)
    endpoints: tuple[str, ...] = ("chat",)


@dataclass(frozen=True)
class EmbeddingsApi:
    """A kind's embeddings API (gateway_engine/wire/embeddings.py speaks it) and its published
    per-request input limits, enforced at submission naming ``input`` (token counts are the engine's
    estimate, ``items.text_tokens``)."""

    max_inputs: int  # inputs in one request (a list's elements)
    max_input_tokens: int  # tokens of one input
    max_request_tokens: int | None  # tokens summed over one request's inputs (None: no such limit)
    max_dimensions: int | None  # the largest ``dimensions`` (None: the model decides)
    source: str  # where the limits are documented
    takes_user: bool = True  # the request carries OpenAI's ``user`` param
    takes_tokens: bool = True  # ``input`` may be token arrays (else text only)


@dataclass(frozen=True)
class ProviderKind:
    """Everything that differs per kind outside its wire module (gateway_engine/wire/<kind>.py)."""

    name: str
    headers: KindHeaders  # what its remaining-quota headers mean (NONE when it sends none)
    only_fields: tuple[str, ...] = ()  # fields only this kind reads (refused on the others)
    required_fields: tuple[str, ...] = ()  # fields this kind requires (non-empty)
    batch_api: BatchApi | None = None  # None: the gateway speaks no batch API of this kind
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    max_burst_seconds: float | None = None  # the provider enforces short windows: a cap on the bucket
    framing: str = SSE  # how its streams are cut into events (FRAMINGS)
    signed: bool = False  # each request is signed by the wire format (``sign``): no fixed auth header
    why_no_batch_api: str = ""  # said where batch_api is refused for this kind (batch_api None)
    embeddings: EmbeddingsApi | None = None  # None: the kind serves no embeddings (why_no_embeddings)
    why_no_embeddings: str = ""  # said where an embeddings item is refused for this kind


_OPENAI_BATCH = BatchApi("openai", 50_000, 200 * 1024 * 1024, endpoints=("chat", "embeddings"))
# platform.openai.com/docs/api-reference/embeddings/create: at most 2,048 inputs, 8,192 tokens each,
# 300,000 tokens summed across a request's inputs (Azure OpenAI's embeddings reference says the same)
_OPENAI_EMBEDDINGS = EmbeddingsApi(
    2048, 8192, 300_000, None, "platform.openai.com/docs/api-reference/embeddings"
)

KINDS: Mapping[str, ProviderKind] = MappingProxyType(
    {
        "anthropic": ProviderKind(
            "anthropic",
            # Anthropic rounds its token counts to the nearest thousand: 500 lower is the least it can be
            KindHeaders(
                UNTIL_RESET, UNTIL_RESET, "docs.anthropic.com/en/api/rate-limits", token_rounding=500
            ),
            batch_api=BatchApi("anthropic", 100_000, 256 * 1024 * 1024, line_model=""),
            why_no_embeddings="Anthropic has no embeddings API (its docs point to Voyage AI)",
        ),
        AZURE_KIND: ProviderKind(
            AZURE_KIND,
            KindHeaders(SHORT_WINDOW, PER_MINUTE, "learn.microsoft.com/azure/ai-foundry/openai/how-to/quota"),
            only_fields=("deployment", "api_version", "batch_deployment"),
            required_fields=("api_version",),
            batch_api=BatchApi(
                "openai",
                50_000,
                200 * 1024 * 1024,
                line_model="deployment",
                required_fields=MappingProxyType({"batch_deployment": "the Global-Batch deployment"}),
            ),
            defaults=MappingProxyType({"burst_seconds": AZURE_MAX_BURST_SECONDS}),
            max_burst_seconds=AZURE_MAX_BURST_SECONDS,
            embeddings=EmbeddingsApi(
                2048, 8192, 300_000, None, "learn.microsoft.com/azure/ai-foundry/openai/reference"
            ),
        ),
        "bedrock": ProviderKind(
            "bedrock",
            KindHeaders(NONE, NONE, "docs.aws.amazon.com/bedrock/latest/userguide/quotas.html"),
            only_fields=("region", "aws_access_key_id"),
            required_fields=("region", "aws_access_key_id"),  # the secret access key is the api_key
            framing=AWS_EVENTSTREAM,
            signed=True,
            why_no_batch_api=(
                "Bedrock batch inference, CreateModelInvocationJob, reads its input from and writes its "
                "output to S3 under an IAM service role, and takes 100 records at least: the gateway has "
                "no S3 store to stage lines in"
            ),
            why_no_embeddings=(
                "the gateway speaks Bedrock's Converse API only; Bedrock's embedding models are "
                "InvokeModel calls with a body of each model's own"
            ),
        ),
        "gemini": ProviderKind(
            "gemini",
            KindHeaders(NONE, NONE, "ai.google.dev/gemini-api/docs/rate-limits"),
            why_no_batch_api="the gateway does not speak Gemini's batch mode",
            # ai.google.dev/api/embeddings: batchEmbedContents takes at most 100 requests ("at most 100
            # requests can be batched"); gemini-embedding-001 takes 2,048 input tokens, 128-3072 dimensions
            embeddings=EmbeddingsApi(
                100, 2048, None, 3072, "ai.google.dev/api/embeddings", takes_user=False, takes_tokens=False
            ),
        ),
        "openai": ProviderKind(
            "openai",
            KindHeaders(UNTIL_RESET, UNTIL_RESET, "platform.openai.com/docs/guides/rate-limits"),
            batch_api=_OPENAI_BATCH,
            embeddings=_OPENAI_EMBEDDINGS,
        ),
    }
)


def embeddings_api(kind: str) -> EmbeddingsApi | None:
    """The embeddings API of ``kind`` (None: it serves none, or the kind is unknown)."""
    descriptor = KINDS.get(kind)
    return descriptor.embeddings if descriptor is not None else None


def embeddings_kinds() -> tuple[str, ...]:
    """The kinds that serve embeddings, sorted (said in a refusal)."""
    return tuple(sorted(k for k, d in KINDS.items() if d.embeddings is not None))


def batch_protocol(kind: str) -> str:
    """The batch-API protocol family of ``kind`` ("openai" or "anthropic"); ValueError naming the kinds
    that have one when it has none (never a silent OpenAI)."""
    descriptor = KINDS.get(kind)
    if descriptor is None or descriptor.batch_api is None:
        known = ", ".join(sorted(k for k, d in KINDS.items() if d.batch_api))
        raise ValueError(f"kind {kind!r} has no batch API the gateway speaks (kinds: {known})")
    return descriptor.batch_api.protocol


def complete_kinds() -> dict[str, ProviderKind]:
    """The kinds with a rule the database holds them to (required fields or a burst cap): the Provider
    model's ``provider_<kind>_complete`` check constraints."""
    return {k: d for k, d in KINDS.items() if d.required_fields or d.max_burst_seconds is not None}

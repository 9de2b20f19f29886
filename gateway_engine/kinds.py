"""Provider kinds: one descriptor per kind, read by every surface that treats kinds differently.

Before, what a kind is lived in side tables — six in provider_file.py (the kinds, which follow remaining
headers, kind-only fields, which have a batch API and its limits, the kind's defaults), the header
meanings in remaining.py, and the batch-API client choice in batch_api/client.py (any kind but
anthropic silently got the OpenAI client). Forgetting one of them (the header kinds, say) silently
turned a feature off. Now:

    provider_file.py   PROVIDER_KINDS, REMAINING_HEADER_KINDS, KIND_ONLY_FIELDS, BATCH_API_KINDS,
                       BATCH_KIND_LIMITS, KIND_DEFAULTS: derived from KINDS
    remaining.py       HEADER_SEMANTICS: each kind's ``headers``
    batch_api/client   ``for_target``: each kind's ``batch_api.protocol`` (a kind without one is refused)
    providers.models   the model's choices and check constraint: PROVIDER_KINDS

What still names a kind on its own: its wire module (gateway_engine/wire/, ``for_kind``; a test holds
the wire kinds equal to KINDS), the simulator's model of it (sim/), and a migration when the list of
kinds changes (the model's choices). A value-type module: it imports nothing of the project.
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


@dataclass(frozen=True)
class ProviderKind:
    name: str
    headers: KindHeaders
    only_fields: tuple[str, ...] = ()  # fields only this kind reads (refused on the others)
    batch_api: BatchApi | None = None
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


_OPENAI_BATCH = BatchApi("openai", 50_000, 200 * 1024 * 1024)

KINDS: Mapping[str, ProviderKind] = MappingProxyType(
    {
        "anthropic": ProviderKind(
            "anthropic",
            KindHeaders(UNTIL_RESET, UNTIL_RESET, "docs.anthropic.com/en/api/rate-limits"),
            batch_api=BatchApi("anthropic", 100_000, 256 * 1024 * 1024),
        ),
        AZURE_KIND: ProviderKind(
            AZURE_KIND,
            KindHeaders(SHORT_WINDOW, PER_MINUTE, "learn.microsoft.com/azure/ai-foundry/openai/how-to/quota"),
            only_fields=("deployment", "api_version", "batch_deployment"),
            batch_api=_OPENAI_BATCH,
            defaults=MappingProxyType({"burst_seconds": AZURE_MAX_BURST_SECONDS}),
        ),
        "gemini": ProviderKind(
            "gemini", KindHeaders(NONE, NONE, "ai.google.dev/gemini-api/docs/rate-limits")
        ),
        "openai": ProviderKind(
            "openai",
            KindHeaders(UNTIL_RESET, UNTIL_RESET, "platform.openai.com/docs/guides/rate-limits"),
            batch_api=_OPENAI_BATCH,
        ),
    }
)


def batch_protocol(kind: str) -> str:
    """The batch-API protocol family of ``kind`` ("openai" or "anthropic"); ValueError naming the kinds
    that have one when it has none (never a silent OpenAI)."""
    descriptor = KINDS.get(kind)
    if descriptor is None or descriptor.batch_api is None:
        known = ", ".join(sorted(k for k, d in KINDS.items() if d.batch_api))
        raise ValueError(f"kind {kind!r} has no batch API the gateway speaks (kinds: {known})")
    return descriptor.batch_api.protocol

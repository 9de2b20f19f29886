"""Provider wire formats by kind: ``for_kind(kind)`` is the one place a provider's API is chosen.

Each kind is one module implementing ``wire.base.WireFormat`` (today ``wire.openai``; the contract's
``azure_openai``, ``anthropic`` and ``gemini`` are added as modules here, docs/contract.md §5). An
unknown kind is refused loudly (``UnknownWireKind``), never silently spoken as OpenAI.
"""

from __future__ import annotations

from .base import USAGE_KEYS, Answer, Endpoint, ErrorVerdict, ParamProblem, Pause, Usage, WireFormat
from .openai import OpenAIWire

DEFAULT_KIND = "openai"
_FORMATS: dict[str, WireFormat] = {OpenAIWire.kind: OpenAIWire()}
KNOWN_KINDS: tuple[str, ...] = tuple(sorted(_FORMATS))


class UnknownWireKind(ValueError):
    """A provider kind no wire format speaks."""


def for_kind(kind: str) -> WireFormat:
    """The wire format of provider kind ``kind``; UnknownWireKind naming it and the known kinds."""
    try:
        return _FORMATS[kind]
    except KeyError:
        known = ", ".join(KNOWN_KINDS)
        raise UnknownWireKind(f"unknown provider kind {kind!r}: known kinds are {known}") from None


__all__ = [
    "DEFAULT_KIND",
    "KNOWN_KINDS",
    "USAGE_KEYS",
    "Answer",
    "Endpoint",
    "ErrorVerdict",
    "ParamProblem",
    "Pause",
    "OpenAIWire",
    "UnknownWireKind",
    "Usage",
    "WireFormat",
    "for_kind",
]

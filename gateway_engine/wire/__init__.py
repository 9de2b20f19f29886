"""Provider wire formats by kind: ``for_kind(kind)`` is the one place a provider's API is chosen.

Each kind is one module implementing ``wire.base.WireFormat`` (docs/contract.md §5): ``wire.openai``,
``wire.azure_openai``, ``wire.anthropic``, ``wire.gemini`` and ``wire.bedrock``. An unknown kind is refused loudly
(``UnknownWireKind``), never silently spoken as OpenAI.

``check_request`` is what submission asks before storing an item for a provider: its params
(``WireFormat.check_params``) and its message content (``check_messages``, which every kind here has:
content parts a kind cannot carry, e.g. an audio part for Anthropic) — each problem names the field
and the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..routing import ProviderConfig
from .anthropic import AnthropicWire
from .azure_openai import AzureOpenAIWire
from .base import USAGE_KEYS, Answer, Endpoint, ErrorVerdict, ParamProblem, Pause, Usage, WireFormat
from .bedrock import BedrockWire
from .gemini import GeminiWire
from .openai import OpenAIWire
from .params import RequestProblems
from .sse import SseParser, SseTooLarge
from .stream_base import SseEvent, StreamDecoder, StreamError, StreamingWire, StreamStep

DEFAULT_KIND = "openai"
_WIRES = (OpenAIWire(), AzureOpenAIWire(), AnthropicWire(), GeminiWire(), BedrockWire())
_FORMATS: dict[str, WireFormat] = {w.kind: w for w in _WIRES}
_STREAMING: dict[str, StreamingWire] = {w.kind: w for w in _WIRES}  # mypy: every kind streams
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


def streaming_for_kind(kind: str) -> StreamingWire:
    """The streaming side of kind ``kind``'s wire format (wire.stream_base); UnknownWireKind as for_kind."""
    for_kind(kind)  # refuses an unknown kind, naming the known ones
    return _STREAMING[kind]


def check_request(
    config: ProviderConfig, messages: list[Any], params: Mapping[str, Any]
) -> list[ParamProblem]:
    """Every param and message field of one item that ``config``'s kind cannot take ([]: sendable)."""
    wire = for_kind(config.kind)
    problems = list(wire.check_params(config, params))
    check_messages = getattr(wire, "check_messages", None)  # not part of the seam's protocol
    if check_messages is not None:
        problems += check_messages(config, messages)
    return problems


__all__ = [
    "DEFAULT_KIND",
    "KNOWN_KINDS",
    "USAGE_KEYS",
    "Answer",
    "Endpoint",
    "ErrorVerdict",
    "ParamProblem",
    "Pause",
    "AnthropicWire",
    "AzureOpenAIWire",
    "BedrockWire",
    "GeminiWire",
    "OpenAIWire",
    "RequestProblems",
    "SseEvent",
    "SseParser",
    "SseTooLarge",
    "StreamDecoder",
    "StreamError",
    "StreamStep",
    "StreamingWire",
    "UnknownWireKind",
    "Usage",
    "WireFormat",
    "check_request",
    "for_kind",
    "streaming_for_kind",
]

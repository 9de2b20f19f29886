"""The provider wire-format seam: what the HTTP layer asks of a provider's API, and the small values
it gets back.

``gateway_engine.http`` owns transport (clients, pools, the deadline, the ``sent`` hook), size caps and
answer cleaning (``gateway_engine.answers``); everything that differs between provider APIs is asked of
a ``WireFormat``:

* the request: the URL, the provider's own headers (auth included) and the JSON body built from the
  model, the item's messages and params (``endpoint``, ``body``; ``reserved_params`` are the params the
  wire format sets itself, refused at submission);
* a successful answer: the usage counts in it (``usage``; the stored response is the cleaned answer);
* rate-limit headers: the ones the provider sends, in the engine's vocabulary (``rate_limit_headers``:
  ``retry-after`` and ``x-ratelimit-*``, read by ``gateway_engine.retry.rate_limit_wait``);
* an error answer: status and body → one of the contract's error types and the message a team sees
  (``classify_error``); whether it is retried follows from the type (``ErrorVerdict.retryable``).

One module per provider kind implements it (``wire.openai``); ``gateway_engine.wire.for_kind`` picks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from ..retry import is_retryable_error
from ..routing import ProviderConfig

# prompt_tokens, completion_tokens, total_tokens (each clamped, gateway_engine.answers.clamp_count)
Usage: TypeAlias = dict[str, int]


@dataclass(frozen=True)
class Endpoint:
    """Where one provider's requests go and the provider-specific headers they carry (auth included);
    fixed for the provider's configuration, so a client computes it once."""

    url: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class ErrorVerdict:
    """What an error answer means: the contract's ``error.type`` and the sanitised message a team sees."""

    error_type: str
    message: str

    @property
    def retryable(self) -> bool:
        """Whether the engine tries again (the retry rule of the error type, gateway_engine.retry)."""
        return is_retryable_error(self.error_type)


class WireFormat(Protocol):
    """One provider API's request shape, answer reading and error meaning (no I/O, no state)."""

    @property
    def kind(self) -> str:
        """The provider kind this format speaks (docs/contract.md §5), e.g. ``"openai"``."""
        ...

    @property
    def reserved_params(self) -> frozenset[str]:
        """Item params the format sets itself; submission refuses them, the body never takes them."""
        ...

    def endpoint(self, config: ProviderConfig) -> Endpoint:
        """The request URL and the provider's headers (auth included) for this provider."""
        ...

    def body(self, config: ProviderConfig, messages: list[Any], params: Mapping[str, Any] | None) -> Any:
        """The JSON body of one request."""
        ...

    def usage(self, body: Any) -> Usage | None:
        """Prompt, completion and total tokens reported in an answer (clamped), or None."""
        ...

    def rate_limit_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The rate-limit headers of a response, named as the engine reads them (raw values; the
        caller cleans and caps them)."""
        ...

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        """An error answer (a non-2xx status, its parsed body or None) → type and team message."""
        ...

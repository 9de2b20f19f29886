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
  (``classify_error``); whether it is retried follows from the type (``ErrorVerdict.retryable``); an
  answer that says the provider will refuse everyone for a while (billing exhausted, a per-day quota)
  carries a ``Pause`` the engine applies to every worker (the quota store's provider pause);
* a successful (2xx) answer → ``Answer``: the OpenAI ``chat.completion`` object every app reads, the
  native answer when it differs, the normalized usage, or a refusal (a 2xx that is an error, e.g. a
  Gemini blocked prompt) (``read_answer``);
* params: which item params the kind takes and in which ranges (``check_params``, at submission, naming
  the field and the provider).

One module per provider kind implements it (``wire.openai``, ``wire.azure_openai``, ``wire.anthropic``,
``wire.gemini``); ``gateway_engine.wire.for_kind`` picks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from ..retry import is_retryable_error
from ..routing import ProviderConfig

# prompt_tokens, completion_tokens, total_tokens (each clamped, gateway_engine.answers.clamp_count);
# optional cached_tokens (input read from the provider's prompt cache, included in prompt_tokens) and
# cache_write_tokens (input written to the cache, included in prompt_tokens). prompt_tokens is ALL input.
Usage: TypeAlias = dict[str, int]
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class Pause:
    """The provider refuses everyone until ``until_epoch`` (Unix seconds; None: until an operator clears
    it). ``reason`` is a short machine word (``billing``, ``per_day_quota``) shown with the pause."""

    reason: str
    until_epoch: float | None = None
    message: str = ""


@dataclass(frozen=True)
class ParamProblem:
    """One param a provider kind cannot take: ``field`` as submission names it (``params.temperature``)
    and the sentence after it (``1.5 is above 1 for provider 'claude' (kind anthropic)``)."""

    field: str
    message: str


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
    pause: Pause | None = None  # the provider refuses everyone for a while: pause it for every worker

    @property
    def retryable(self) -> bool:
        """Whether the engine tries again (the retry rule of the error type, gateway_engine.retry)."""
        return is_retryable_error(self.error_type)


@dataclass(frozen=True)
class Answer:
    """A 2xx answer read by its wire format: ``response`` is the OpenAI ``chat.completion`` object apps
    read (the answer itself for kind openai), ``native`` the provider's own answer when it differs
    (None for openai), ``usage`` normalized (USAGE_KEYS) or None. ``refusal`` set: the 2xx is an error
    (e.g. a Gemini prompt blocked with no candidates) and the attempt failed with that verdict."""

    response: dict[str, Any] | None
    native: dict[str, Any] | None = None
    usage: Usage | None = None
    refusal: ErrorVerdict | None = None


class AnswerReading(Protocol):
    """What reads one answer (``outcomes.from_answer``): a 2xx → ``Answer``, the usage, the rate-limit
    headers, an error's verdict. Every ``WireFormat`` is one; an embeddings request carries its own
    (``wire.embeddings.EmbeddingsRequest.reader``: a translated answer needs the request's inputs)."""

    def read_answer(self, body: dict[str, Any]) -> Answer:
        """A 2xx JSON-object answer → the OpenAI-shaped response, the native answer, the normalized
        usage, or a refusal."""
        ...

    def usage(self, body: Any) -> Usage | None:
        """The normalized usage (USAGE_KEYS, clamped) reported in an answer — also error answers,
        which can be billed — or None."""
        ...

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        """The rate-limit signals of a response, named as the engine reads them (see WireFormat)."""
        ...

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        """An error answer (a non-2xx status, its parsed body or None) → its verdict."""
        ...


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

    def check_params(self, config: ProviderConfig, params: Mapping[str, Any]) -> list[ParamProblem]:
        """Every param of an item this provider cannot take (unknown to the kind, a wrong type, out of
        range), each naming the field and the provider; [] if the item can be sent as it is."""
        ...

    def read_answer(self, body: dict[str, Any]) -> Answer:
        """A 2xx JSON-object answer → the OpenAI-shaped response, the native answer, the normalized
        usage, or a refusal."""
        ...

    def usage(self, body: Any) -> Usage | None:
        """The normalized usage (USAGE_KEYS, clamped) reported in an answer — also error answers,
        which can be billed — or None."""
        ...

    def rate_limit_headers(self, headers: Mapping[str, str], body: Any = None) -> dict[str, str]:
        """The rate-limit signals of a response, named as the engine reads them (raw values; the
        caller cleans and caps them): ``retry-after`` (seconds or an HTTP date),
        ``x-ratelimit-reset-requests`` / ``-tokens`` and ``x-ratelimit-remaining-requests`` / ``-tokens``
        (durations, seconds, RFC 3339 or HTTP dates). A kind whose wait is in the body (Gemini's
        ``RetryInfo.retryDelay``) or in another header (Azure's ``retry-after-ms``) translates it here."""
        ...

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        """An error answer (a non-2xx status, its parsed body or None) → type, team message, and the
        provider-wide pause it asks for (billing exhausted, a per-day quota), if any."""
        ...


class SigningWire(Protocol):
    """What a wire format adds when its kind signs each request (descriptor ``signed``, e.g. Bedrock's
    SigV4): the HTTP layer builds the body, then asks for the headers to send with it."""

    def sign(
        self, config: ProviderConfig, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        """``headers`` plus the signature headers (``Authorization``, ``X-Amz-Date`` …) for this request."""
        ...

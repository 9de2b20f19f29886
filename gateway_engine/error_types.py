"""The error types an item or attempt can end with: names only (a value-type module, importing
nothing). What each one means — retried or not, a breaker failure or not, how every surface answers it
— is its row in gateway_engine/error_kinds.py."""

from __future__ import annotations


class ErrorType:
    """The error types an item or attempt can end with (the gateway's ``batches.models.ErrorType`` has
    the same values)."""

    CLIENT_ERROR = "client_error"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    QUOTA_IMPOSSIBLE = "quota_impossible"
    NO_PROVIDER = "no_provider"
    INVALID_RESPONSE = "invalid_response"
    GATEWAY_ERROR = "gateway_error"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    BUDGET_EXCEEDED = "budget_exceeded"
    # the provider is overloaded for every customer (Anthropic 529, Gemini 503 UNAVAILABLE): retried with
    # backoff and counted by the breaker, never a quota signal (no bucket pause, never counted as a 429)
    OVERLOADED = "overloaded"
    # the provider account's billing or spend limit (OpenAI insufficient_quota, Anthropic spend limits):
    # never retried there; the provider is paused until an operator clears it; the item falls back
    PROVIDER_QUOTA_EXHAUSTED = "provider_quota_exhausted"

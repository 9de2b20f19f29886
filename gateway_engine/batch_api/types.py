"""Value types of the provider batch-API clients (imports nothing of the project).

``RemoteBatch.state`` is normalized across kinds (``STATES``):

========== ================================= =============================================
state      OpenAI / Azure ``status``          Anthropic ``processing_status``
========== ================================= =============================================
submitted  validating                         —
in_progress in_progress                       in_progress
finalizing finalizing                         —
ended      completed                          ended (some line not canceled/expired, or 0 lines)
canceling  cancelling                         canceling
failed     failed (file refused: ``errors``)  —
expired    expired                            ended, every line expired
cancelled  cancelled                          ended, every line canceled (or canceled+expired,
                                              with ``cancel_initiated_at`` set)
========== ================================= =============================================

``ended`` is true for the terminal states (ended, failed, expired, cancelled): results can be read
(a cancelled or expired OpenAI batch still has an output/error file for the lines it finished).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..kinds import batch_protocol

# the normalized states, in life order; TERMINAL ones have results (or, for failed, none)
STATES = (
    "submitted",
    "in_progress",
    "finalizing",
    "ended",
    "canceling",
    "failed",
    "expired",
    "cancelled",
)
TERMINAL_STATES = frozenset({"ended", "failed", "expired", "cancelled"})


Outcome = Literal["succeeded", "errored", "canceled", "expired"]


@dataclass(frozen=True)
class BatchTarget:
    """What a client needs to reach one provider's batch API.

    ``base_url``: the provider's base URL as configured for real-time calls (OpenAI ``…/v1``, Azure the
    resource root ``https://x.openai.azure.com``, Anthropic ``…/v1``). ``batch_deployment``: Azure's
    Global-Batch deployment (each line's ``model``); ``model``: the provider's model (informational for
    OpenAI/Anthropic, whose bodies carry their own).
    """

    kind: str
    base_url: str
    api_key: str | None
    api_version: str | None
    batch_deployment: str | None
    model: str
    anthropic_version: str = "2023-06-01"
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        try:
            batch_protocol(self.kind)  # the kind's descriptor (gateway_engine/kinds.py) has a batch API
        except ValueError as exc:
            raise ValueError(f"kind: {exc}") from None
        if not self.base_url:
            raise ValueError("base_url: required")
        if self.kind == "azure_openai" and not self.api_version:
            raise ValueError("api_version: required for an azure_openai batch target")
        if self.kind == "azure_openai" and not self.batch_deployment:
            raise ValueError("batch_deployment: required for an azure_openai batch target")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {self.timeout_s!r}")


@dataclass(frozen=True)
class BatchLine:
    """One request of a provider batch: ``body`` is exactly the JSON body the real-time call of that
    kind would POST (OpenAI/Azure: a chat-completions body with ``model``; Anthropic: Messages API
    params). The client wraps it into the kind's line format."""

    custom_id: str
    body: dict[str, Any]
    # the item's endpoint (gateway_engine.endpoints): "chat", or "embeddings" where the kind's batch API
    # takes embeddings lines (kinds.BatchApi.endpoints); one provider batch holds lines of one endpoint
    endpoint: str = "chat"


@dataclass(frozen=True)
class RemoteBatch:
    """One provider batch as the provider reports it (``state`` normalized, ``raw_status`` as sent)."""

    id: str
    state: str
    raw_status: str
    total: int
    succeeded: int
    errored: int
    created_at: float
    expires_at: float | None
    ended: bool
    output_file_id: str | None = None
    error_file_id: str | None = None
    results_url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Anthropic only: lines canceled / expired (OpenAI reports them in its error file or not at all)
    canceled: int = 0
    expired: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # OpenAI/Azure ``errors.data`` (failed)


@dataclass(frozen=True)
class LineResult:
    """One line's result: ``body`` is the kind's NATIVE answer for a success (an OpenAI chat completion,
    an Anthropic Message); ``error`` the provider's error object otherwise."""

    custom_id: str
    outcome: Outcome
    status_code: int | None
    body: dict[str, Any] | None
    error: dict[str, Any] | None


class BatchApiError(Exception):
    """A batch-API call failed: ``retryable`` per the project's rule (gateway_engine.retry: 429, 5xx,
    timeout, connection, invalid answer retryable; other 4xx not); ``status`` None without an answer."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None,
        retryable: bool,
        retry_after: float | None = None,
        error_type: str = "",
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.error_type = error_type

    def __repr__(self) -> str:
        return f"BatchApiError({self.message!r}, status={self.status}, retryable={self.retryable})"

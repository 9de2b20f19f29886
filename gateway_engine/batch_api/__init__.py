"""The providers' own batch APIs (OpenAI Batch API, Azure OpenAI global batch, Anthropic Message
Batches): Django-free clients behind one Protocol (``client.BatchApiClient``), value types in ``types``.

The gateway's provider-batch route (issue #23) builds on this package: it groups lines, stores intent
rows, polls and applies results; this package only speaks each kind's batch wire format over
gateway_engine.http (the one module that talks HTTP to providers).
"""

from .adoption import matches as adoption_matches
from .client import BatchApiClient, for_target
from .errors import line_verdict
from .types import (
    STATES,
    TERMINAL_STATES,
    BatchApiError,
    BatchLine,
    BatchTarget,
    LineResult,
    RemoteBatch,
)

__all__ = [
    "STATES",
    "TERMINAL_STATES",
    "BatchApiClient",
    "BatchApiError",
    "BatchLine",
    "BatchTarget",
    "LineResult",
    "RemoteBatch",
    "adoption_matches",
    "for_target",
    "line_verdict",
]

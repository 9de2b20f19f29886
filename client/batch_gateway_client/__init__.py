"""The Batch Gateway's Python client (no Django; httpx only).

    from batch_gateway_client import Gateway

    gw = Gateway("http://127.0.0.1:8000", "bgw_...")
    results = gw.batch([{"custom_id": "q1", "route": "intent", "query": "Where is my order?"}])
    answer = gw.chat("intent", "Where is my order?")

``batch_gateway_client.langchain.GatewayRunnable`` (the ``langchain`` extra) is the LangChain Runnable.
docs/client.md is the guide.
"""

from ._version import __version__
from .client import AsyncChatStream, ChatStream, Gateway
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BatchWaitTimeout,
    ConflictError,
    FieldError,
    GatewayError,
    InternalServerError,
    ItemFailedError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
    StreamError,
)

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncChatStream",
    "AuthenticationError",
    "BadRequestError",
    "BatchWaitTimeout",
    "ChatStream",
    "ConflictError",
    "FieldError",
    "Gateway",
    "GatewayError",
    "InternalServerError",
    "ItemFailedError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServiceUnavailableError",
    "StreamError",
    "__version__",
]

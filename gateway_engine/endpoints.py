"""The API surfaces a request can come in on and what the provider is asked for: a value-type module.

``Endpoint`` names what the caller spoke (the stats, usage, cost and pages say which endpoint the
tokens went to): ``chat`` (``/v1/chat/completions``, REST items with ``messages``/``query``),
``embeddings`` (``/v1/embeddings``, REST items with ``"endpoint": "embeddings"`` and ``input``),
``responses`` (``/v1/responses``) and ``messages`` (Anthropic's ``/v1/messages``). What goes on the
wire is one of two request families (``WIRE_FAMILY``): a chat request (``responses`` and ``messages``
are translated to and from it at their surface) or an embeddings request. It imports nothing.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

Endpoint: TypeAlias = Literal["chat", "embeddings", "responses", "messages"]

CHAT: Final = "chat"
EMBEDDINGS: Final = "embeddings"
RESPONSES: Final = "responses"
MESSAGES: Final = "messages"
ENDPOINTS: Final[tuple[Endpoint, ...]] = (CHAT, EMBEDDINGS, RESPONSES, MESSAGES)

# what the provider is asked for per endpoint: "chat" (a chat request of the provider's kind) or
# "embeddings" (an embeddings request of the provider's kind)
WIRE_FAMILY: Final[dict[Endpoint, str]] = {
    CHAT: CHAT,
    EMBEDDINGS: EMBEDDINGS,
    RESPONSES: CHAT,
    MESSAGES: CHAT,
}

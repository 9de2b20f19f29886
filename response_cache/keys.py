"""The cache key and the dedup key (docs/cache.md "Keys"): SHA-256 of canonical JSON (sorted keys, no
whitespace, UTF-8), pure.

Cache key: team (unless teams share the cache: GATEWAY_CACHE_SHARED_ACROSS_TEAMS), provider name,
provider model, messages (a ``query`` expanded to one user message, as submission stores it; an embeddings
item's input: ``keyed_content``) and every
param except EXCLUDED_PARAMS. Dedup key: the same with the item's target (route or provider) in place
of the provider: identical items of one team are sent once whichever provider answers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

# params that do not change the answer's content (who asked, how it is delivered)
EXCLUDED_PARAMS = frozenset({"user", "metadata", "stream", "stream_options"})
SHARED = ""  # the team part of a key when teams share the cache


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, non-ASCII kept: the same value gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def expand_messages(messages: Sequence[Any] | None, query: str | None = None) -> list[Any]:
    """The messages of an item: ``query`` becomes one user message (what submission stores)."""
    if query is not None:
        return [{"role": "user", "content": query}]
    return list(messages or [])


def keyed_content(payload: Mapping[str, Any]) -> list[Any]:
    """What a stored item's key is taken over besides its params: its messages, or for an embeddings
    item (``input``, gateway_engine.item_shape) one entry naming the endpoint and the input — so no two
    embedding items share a key, and none shares one with a chat item."""
    if payload.get("input") is not None:
        return [{"endpoint": "embeddings", "input": payload["input"]}]
    return expand_messages(payload.get("messages"))


def keyed_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every param but EXCLUDED_PARAMS."""
    return {k: v for k, v in (params or {}).items() if k not in EXCLUDED_PARAMS}


def _digest(parts: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


def team_part(team_id: int | str | None, shared: bool) -> str:
    return SHARED if shared or team_id is None else str(team_id)


def cache_key(
    *, team: str, provider: str, model: str, messages: Sequence[Any], params: Mapping[str, Any] | None
) -> str:
    """The key an answer of ``provider`` (its ``model``) to these messages and params is stored under."""
    return _digest(
        {
            "team": team,
            "provider": provider,
            "model": model,
            "messages": list(messages),
            "params": keyed_params(params),
        }
    )


def dedup_key(*, team: str, target: str, messages: Sequence[Any], params: Mapping[str, Any] | None) -> str:
    """Identical items of one team (``target``: "route:NAME" or "provider:NAME") share this key."""
    return _digest(
        {"team": team, "target": target, "messages": list(messages), "params": keyed_params(params)}
    )

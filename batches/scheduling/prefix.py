"""Prefix grouping (issue #25): items whose prompts share a prefix are sent back to back, so a provider's
prompt cache (OpenAI/Azure/Gemini automatic, Anthropic at ``cache_control`` breakpoints) still holds the
prefix when the next item of the group arrives. Pure: no Django, no I/O.

* ``prefix_key(payload)`` — computed once at submission and stored on the item (``BatchItem.prefix_key``):
  a hash of what every item of a group repeats at the start of its prompt — the tools, then every message
  but the last (the system prompt and any few-shot turns). "" when there is nothing to share (a lone
  message) or the shared part is shorter than ``MIN_PREFIX_CHARS`` (no provider caches it).
* ``group_by_prefix(keys, current)`` — the order in which one team's claimed quantum is handed to the
  engine: items of one key together, the group continuing the last one sent (``current``) first, the other
  groups in order of their first item (so with no shared prefixes the order is unchanged).

It only reorders within a quantum the fair scheduler (fair.py) already gave to one team; the dispatcher
also asks the claim to take whole groups of that team's items, the ``current`` prefix first
(claims.claim_queued, ``prefix``), inside the batch order fair.py decided — so how many items each team
and lane gets is unchanged, only which of a team's own items come first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

# The shortest shared part worth grouping for: ~512 tokens at 4 characters a token (the smallest
# minimum any provider documents for a cache entry; most take 1,024).
MIN_PREFIX_CHARS = 2048
KEY_LENGTH = 32  # hex characters of the SHA-256 kept (BatchItem.prefix_key)


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_chars(p.get("text") if isinstance(p, dict) else p) for p in value)
    return 0


def _shared(payload: Mapping[str, Any]) -> tuple[list[Any], Any] | None:
    messages = payload.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        return None
    params = payload.get("params")
    tools = params.get("tools") if isinstance(params, dict) else None
    return messages[:-1], tools


def prefix_key(payload: Mapping[str, Any]) -> str:
    """The item's prefix group ("" = none); the same leading messages and tools give the same key."""
    shared = _shared(payload)
    if shared is None:
        return ""
    leading, tools = shared
    if sum(_chars(m.get("content")) for m in leading if isinstance(m, dict)) < MIN_PREFIX_CHARS:
        return ""
    canonical = json.dumps([tools, leading], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_LENGTH]


def prefix_keyer() -> Callable[[Mapping[str, Any]], str]:
    """``prefix_key`` with a memo for one submission: items repeating the same system prompt are hashed
    once (the memo's lookup compares the strings in C; plain-string messages only, others are hashed)."""
    memo: dict[Hashable, str] = {}

    def key(payload: Mapping[str, Any]) -> str:
        shared = _shared(payload)
        if shared is None:
            return ""
        leading, tools = shared
        plain = tools is None and all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
            for m in leading
        )
        if not plain:
            return prefix_key(payload)
        memo_key = tuple((m["role"], m["content"]) for m in leading)
        if memo_key not in memo:
            memo[memo_key] = prefix_key(payload)
        return memo[memo_key]

    return key


def group_by_prefix(keys: Sequence[str], current: str = "") -> list[int]:
    """Indexes of ``keys`` in send order: one group per key, ``current``'s group first, then the groups
    in order of their first index; inside a group the original order. Items without a key ("") are
    groups of one each, in place."""
    groups: dict[str, list[int]] = {}
    order: list[tuple[str, int]] = []  # (key, index) of each group's first member; "" items stay alone
    for i, key in enumerate(keys):
        if not key:
            order.append(("", i))
        elif key in groups:
            groups[key].append(i)
        else:
            groups[key] = [i]
            order.append((key, i))
    if current and current in groups:
        order.sort(key=lambda entry: entry[0] != current)  # stable: only the current group moves up
    out: list[int] = []
    for key, first in order:
        out.extend(groups[key] if key else [first])
    return out


class PrefixGrouping:
    """One dispatcher slice's grouping state: per (provider queue, team), the prefix key of the last item
    handed to the engine — the group the next claim continues. ``enabled`` False (setting
    ``GATEWAY_PREFIX_GROUPING``): claims and hand-over in submission order, as before."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.current: dict[tuple[str, str], str] = {}

    def prefer(self, provider: str, team: str) -> str | None:
        """The claim's ``prefix`` (claims.claim_queued): the key of the group being sent to this queue
        for this team ("" = none yet), None when grouping is off (claims in seq order)."""
        return self.current.get((provider, team), "") if self.enabled else None

    def order(self, provider: str, team: str, rows: Sequence[Any]) -> list[Any]:
        """A claimed quantum (rows with ``prefix_key``) in send order; remembers the group it ends with."""
        if not self.enabled or not rows:
            return list(rows)
        keys = [row.prefix_key for row in rows]
        ordered = [rows[i] for i in group_by_prefix(keys, self.prefer(provider, team) or "")]
        self.current[(provider, team)] = ordered[-1].prefix_key
        return ordered

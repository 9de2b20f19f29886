"""The simulated providers' prompt caches (issue #25): each kind's caching rule, over a small LRU of prefixes.

The rules, as the providers document them:

* ``openai`` / ``azure_openai`` — automatic: a prompt of at least 1,024 tokens has its prefix cached; a
  later prompt that starts with the same text reads the common prefix, counted in 128-token increments
  past the first 1,024 (``usage.prompt_tokens_details.cached_tokens``). Nothing to mark, nothing written.
* ``anthropic`` — only at ``cache_control`` breakpoints (``{"type": "ephemeral"}`` on a system block, a
  message content block, or the top-level ``cache_control`` = the last block): the prefix up to and
  including a marked block is the cache entry, if it has at least the model's minimum cacheable length
  (``prompt_cache_min_tokens``, default 1,024; Haiku-class models use 2,048 or 4,096). A request reads the
  longest cached breakpoint prefix (``cache_read_input_tokens``) and writes the rest up to its last
  breakpoint (``cache_creation_input_tokens``); ``input_tokens`` excludes both. At most 4 breakpoints.
* ``gemini`` — implicit caching: like OpenAI's, token-exact, reported as ``usageMetadata.
  cachedContentTokenCount`` (part of ``promptTokenCount``).

An entry becomes readable when the request that wrote it begins its answer (Anthropic: "a cache entry
only becomes available after the first response begins"), so items of one prefix sent all at once miss
together, as at the real providers. The cache keeps ``prompt_cache_entries`` prefixes (LRU, default 4; 0
turns the cache off) for ``prompt_cache_ttl_ms`` simulated ms after their last use (default 300,000 = 5
minutes, divided by time_scale): interleaving more prefixes than that evicts them before their reuse.
Token counts follow sim.tokens: ceil(characters / 4) of the prompt's texts, concatenated in the kind's
order (system first). Tools are not counted in the simulator's token estimate, so a breakpoint on a tool
caches nothing of its own.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass

from sim.kind_config import ConfigError, number

OPENAI_MINIMUM = 1024
OPENAI_INCREMENT = 128
MAX_BREAKPOINTS = 4  # Anthropic: at most 4 cache_control blocks per request
KEYS = {"prompt_cache_entries", "prompt_cache_ttl_ms", "prompt_cache_min_tokens"}


@dataclass(frozen=True)
class PromptCacheConfig:
    entries: int = 4  # prefixes kept (LRU); 0 = no prompt cache
    ttl_ms: float = 300_000.0  # simulated ms after the last use
    min_tokens: int = 1024  # the shortest cacheable prefix (OpenAI: 1,024; Anthropic: per model)


def parse_prompt_cache(raw: dict, where: str) -> PromptCacheConfig:
    return PromptCacheConfig(
        entries=number(raw, "prompt_cache_entries", where, 4, minimum=0, maximum=100_000, integer=True),
        ttl_ms=number(raw, "prompt_cache_ttl_ms", where, 300_000.0, minimum=0.001),
        min_tokens=number(raw, "prompt_cache_min_tokens", where, 1024, minimum=1, integer=True),
    )


@dataclass(frozen=True)
class Lookup:
    """What one request reads from the cache and writes into it (tokens), and what it stores."""

    read: int = 0
    write: int = 0
    store: tuple[tuple[str, str], ...] = ()  # (key, prefix text) entries to insert when the answer begins


def tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (binary search over C-speed slice compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PromptCache:
    """One provider's cache: key → (prefix text, expires at), least recently used first."""

    def __init__(self, kind: str, cfg: PromptCacheConfig, time_scale: float) -> None:
        self.kind, self.cfg = kind, cfg
        self.ttl_s = cfg.ttl_ms / 1000.0 / time_scale
        self.entries: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.evictions = 0

    @property
    def enabled(self) -> bool:
        return self.cfg.entries > 0

    def _get(self, key: str, now: float) -> str | None:
        hit = self.entries.get(key)
        if hit is None:
            return None
        if hit[1] <= now:
            del self.entries[key]
            return None
        return hit[0]

    def lookup(self, texts: list[str], breakpoints: list[int], now: float) -> Lookup:
        """What a request with these texts (and, Anthropic, breakpoints: indexes into texts after which
        a marked block ends) reads and writes. No side effect: ``store`` is applied by ``put``."""
        if not self.enabled:
            return Lookup()
        if self.kind == "anthropic":
            return self._anthropic(texts, breakpoints, now)
        return self._automatic("".join(texts), now)

    def _automatic(self, text: str, now: float) -> Lookup:
        minimum = self.cfg.min_tokens
        if tokens(len(text)) < minimum:
            return Lookup()
        key = _digest(text[: minimum * 4])  # the first `minimum` tokens route the prompt to its entry
        stored = self._get(key, now)
        read = 0
        if stored is not None:
            common = tokens(common_prefix(stored, text)) if len(text) >= minimum * 4 else 0
            common = min(common, tokens(len(text)))
            if common >= minimum:
                read = common
                if self.kind != "gemini":  # OpenAI / Azure: 1,024 then 128-token increments
                    read = minimum + (common - minimum) // OPENAI_INCREMENT * OPENAI_INCREMENT
        return Lookup(read=read, store=((key, text),))

    def _anthropic(self, texts: list[str], breakpoints: list[int], now: float) -> Lookup:
        marks = sorted(set(b for b in breakpoints if 0 <= b <= len(texts)))[-MAX_BREAKPOINTS:]
        ends = []  # char offset of each cacheable breakpoint prefix
        offset, position = 0, 0
        for mark in marks:
            offset += sum(len(t) for t in texts[position:mark])
            position = mark
            if tokens(offset) >= self.cfg.min_tokens:
                ends.append(offset)
        if not ends:
            return Lookup()
        text = "".join(texts)
        read_at = 0
        for end in reversed(ends):
            if self._get(_digest(text[:end]), now) is not None:
                read_at = end
                break
        read = tokens(read_at)
        write = tokens(ends[-1]) - read
        store = tuple((_digest(text[:end]), "") for end in ends if end >= read_at)
        return Lookup(read=read, write=write, store=store)

    def put(self, lookup: Lookup, now: float) -> None:
        """The answer begins: the request's prefixes become readable (or are refreshed) for ttl."""
        for key, text in lookup.store:
            self.entries[key] = (text, now + self.ttl_s)
            self.entries.move_to_end(key)
        while len(self.entries) > self.cfg.entries:
            self.entries.popitem(last=False)
            self.evictions += 1

    def clear(self) -> None:
        self.entries.clear()
        self.evictions = 0


def check_config(raw: dict, where: str) -> None:
    """Refuse prompt-cache keys next to the fixed-ratio options they would contradict."""
    if set(raw) & KEYS and (raw.get("cache_read_ratio") or raw.get("cache_write_ratio")):
        raise ConfigError(f"{where}.cache_read_ratio: give cache_read_ratio / cache_write_ratio or "
                          f"prompt_cache_* options, not both")  # fmt: skip

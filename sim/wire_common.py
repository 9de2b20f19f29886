"""What every kind's wire module shares: the parsed call, a reply, content triggers, RFC 3339 times."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

# Content triggers: a message text containing one of these makes that one request answer a fault form.
#   [[sim:blocked]]        gemini: 200 with promptFeedback.blockReason SAFETY and no candidates
#   [[sim:input_filter]]   azure_openai: 400 content_filter (the prompt was filtered)
#   [[sim:output_filter]]  azure_openai: 200 with finish_reason "content_filter"
#   [[sim:refusal]]        anthropic: 200 with stop_reason "refusal"
#   [[sim:fault:NAME]]     any kind: the named form NAME of the provider's kind (sim/kind_config.py)
TRIGGER_RE = re.compile(r"\[\[sim:(?:fault:)?([a-z_0-9]+)\]\]")
TRIGGER_FORMS = {"blocked", "input_filter", "output_filter", "refusal"}


@dataclass
class Call:
    """One validated request, in the terms the pipeline needs whatever the kind."""

    texts: list[str]  # every text of the prompt (system included), for tokens, triggers and tags
    last_text: str  # the last message's text (trace tags)
    max_tokens: int
    model: str
    stop_sequences: list[str] = field(default_factory=list)
    api_version: str = ""  # azure_openai: the request's api-version
    # streamed answer: None = a plain JSON answer, "sse" = Server-Sent Events, "json" = Gemini's JSON array
    # (streamGenerateContent without alt=sse); include_usage: OpenAI's stream_options.include_usage
    stream: str | None = None
    include_usage: bool = False
    # Anthropic cache_control breakpoints: indexes into ``texts`` after which a marked block ends
    # (sim/prompt_cache.py); other kinds cache automatically
    breakpoints: list[int] = field(default_factory=list)
    cache_lookup: Any = None  # the provider's prompt-cache lookup for this call (sim/prompt_cache.Lookup)
    # "embeddings" (sim/wire_embeddings.py): ``texts`` are the inputs, one vector each; no completion
    endpoint: str = "chat"
    dimensions: int | None = None  # OpenAI ``dimensions``
    encoding_format: str = "float"  # OpenAI ``encoding_format``
    dimensions_each: list[int | None] = field(default_factory=list)  # Gemini outputDimensionality per input
    single: bool = False  # Gemini embedContent (one input) rather than batchEmbedContents

    def trigger(self, forms) -> str | None:
        """The form named by the first content trigger in the prompt that is one of ``forms`` (the
        provider kind's; another kind's trigger is plain text). None: no such trigger."""
        for text in self.texts:
            for m in TRIGGER_RE.finditer(text):
                if m.group(1) in forms:
                    return m.group(1)
        return None


@dataclass
class Reply:
    """An answer to send: status, JSON body, headers; ``rejected`` counts a shape / auth rejection."""

    status: int
    body: dict
    headers: dict[str, str] = field(default_factory=dict)
    rejected: str | None = None  # "shape" | "auth" | None


@dataclass(frozen=True)
class Usage:
    """Token counts of one answer: ``prompt`` = all input; cache reads / writes are parts of it."""

    prompt: int
    completion: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def uncached(self) -> int:
        return self.prompt - self.cache_read - self.cache_write


def split_cache(prompt: int, read_ratio: float, write_ratio: float) -> Usage:
    """The prompt's tokens split into cache reads and writes (floors of the configured fractions)."""
    return Usage(prompt, 0, math.floor(prompt * read_ratio), math.floor(prompt * write_ratio))


def rfc3339_after(seconds: float) -> str:
    """The wall-clock time ``seconds`` from now, RFC 3339 in UTC (Anthropic's *-reset headers)."""
    t = datetime.now(UTC) + timedelta(seconds=max(0.0, seconds))
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{t.microsecond // 1000:03d}Z"


def type_name(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)  # fmt: skip


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

"""Token estimates used by the simulator (documented so clients can predict the TPM charge)."""

from __future__ import annotations

import math


def message_chars(messages: list[dict]) -> int:
    total = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):  # OpenAI content parts
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += len(part["text"])
    return total


def estimate_prompt_tokens(messages: list[dict]) -> int:
    """ceil(characters of all message contents / 4), at least 1."""
    return max(1, math.ceil(message_chars(messages) / 4))


def estimate_text_tokens(texts: list[str]) -> int:
    """The same estimate over plain texts (every kind's prompt: system and messages): ceil(chars / 4)."""
    return max(1, math.ceil(sum(len(t) for t in texts) / 4))

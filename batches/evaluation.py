"""An evaluation's copies (docs/contract.md §4 "targets"): the stored ``custom_id`` of an item's copy for
one target and back, and how two copies' answers are compared (the comparison's agreement). Pure: read
by submission (batches.submission.fanout), the RESULT (batches.selectors) and the comparison
(batches.comparison)."""

from __future__ import annotations

import re

SEPARATOR = "@"
_SPACES = re.compile(r"\s+")
# stripped from the end of a normalised answer ("Paris." == "paris")
TRAILING_PUNCTUATION = ".,;:!?。、\"'`)]}"


def copy_id(custom_id: str, target: str) -> str:
    """The stored ``custom_id`` of an item's copy for ``target``: unique in the batch, the key the
    engine, the attempt journal and the provider batch files use."""
    return f"{custom_id}{SEPARATOR}{target}"


def own_id(stored_id: str, target: str) -> str:
    """The item's own ``custom_id`` from its copy's stored one (``target`` "": not a copy)."""
    return stored_id[: -(len(target) + len(SEPARATOR))] if target else stored_id


def normalised(answer: str) -> str:
    """An answer as the agreement compares it: trimmed, case-folded, runs of whitespace made one
    space, trailing punctuation stripped."""
    return _SPACES.sub(" ", answer.casefold()).strip().rstrip(TRAILING_PUNCTUATION).rstrip()

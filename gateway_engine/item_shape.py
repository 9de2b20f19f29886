"""The shape of one contract ITEM, stated once: what every reader of an item checks before using it.

An ITEM is an object with a string ``custom_id`` (not empty), exactly one of ``route``/``provider``,
an ``endpoint`` when given (``chat``, the default, or ``embeddings``: gateway_engine.endpoints), and its
content: for a chat item exactly one of ``messages``/``query`` (``query`` a string, ``messages`` a
non-empty list) and no ``input``; for an embeddings item an ``input`` (a non-empty string or a
non-empty list of non-empty strings; or OpenAI's token arrays) and neither ``messages`` nor ``query``; when given, ``params`` as
an object. Two readers apply this rule: the engine's ``WorkItem.coerce`` and the
submission validator (``batches.submission.validation``), which adds its own limits on top (lengths,
roles, known routes, ...).

The readers differ only in *what counts as given* (a ``Reading``) and in how they word a problem
(each maps a ``Problem`` to its own message: the engine raises one ``ValueError`` naming
``items[i].field``, the submission API lists every problem per field). The rule itself — which
problems exist and in which order they are found — is here and nowhere else.

Django-free; imports nothing of the engine but the import-free ``endpoints``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from .endpoints import CHAT, EMBEDDINGS

__all__ = [
    "CHAT_ENDPOINT",
    "EMBEDDINGS_ENDPOINT",
    "ITEM_ENDPOINTS",
    "LENIENT",
    "STRICT",
    "ItemShape",
    "Problem",
    "Reading",
    "ShapeProblem",
    "check_item_shape",
    "input_problem",
    "token_array",
]

Given = Callable[[Mapping[str, Any], str], bool]


class Problem(enum.Enum):
    """One way an item breaks the shape rule (each reader words it)."""

    NOT_AN_OBJECT = "not_an_object"
    CUSTOM_ID_MISSING = "custom_id_missing"
    CUSTOM_ID_NOT_A_STRING = "custom_id_not_a_string"
    CUSTOM_ID_EMPTY = "custom_id_empty"
    TARGET_BOTH = "target_both"  # route and provider
    TARGET_NEITHER = "target_neither"
    CONTENT_BOTH = "content_both"  # messages and query
    CONTENT_NEITHER = "content_neither"
    QUERY_NOT_A_STRING = "query_not_a_string"
    MESSAGES_NOT_A_LIST = "messages_not_a_list"
    MESSAGES_EMPTY = "messages_empty"
    PARAMS_NOT_AN_OBJECT = "params_not_an_object"
    ENDPOINT_UNKNOWN = "endpoint_unknown"  # not one of ITEM_ENDPOINTS
    INPUT_MISSING = "input_missing"  # an embeddings item without input
    INPUT_NOT_FOR_CHAT = "input_not_for_chat"  # input on a chat item
    CONTENT_NOT_FOR_EMBEDDINGS = "content_not_for_embeddings"  # messages/query on an embeddings item
    INPUT_NOT_TEXT = "input_not_text"  # neither a string nor a list
    INPUT_EMPTY = "input_empty"  # "" or []
    INPUT_ELEMENT_NOT_TEXT = "input_element_not_text"  # a list element that is not a non-empty string


# the endpoints an ITEM may name (gateway_engine.endpoints; the others are interactive surfaces whose
# requests are chat items on the wire)
CHAT_ENDPOINT: Final = CHAT
EMBEDDINGS_ENDPOINT: Final = EMBEDDINGS
ITEM_ENDPOINTS: Final = (CHAT_ENDPOINT, EMBEDDINGS_ENDPOINT)


@dataclass(frozen=True)
class ShapeProblem:
    """A problem and the field it is about ("" for the item as a whole)."""

    field: str
    problem: Problem


def _present(item: Mapping[str, Any], key: str) -> bool:
    return key in item


def _set(item: Mapping[str, Any], key: str) -> bool:
    return item.get(key) is not None


def _truthy(item: Mapping[str, Any], key: str) -> bool:
    return bool(item.get(key))


@dataclass(frozen=True)
class Reading:
    """How a reader decides that an item gives a field, and which values are objects."""

    object_type: type | tuple[type, ...]
    route: Given
    provider: Given
    messages: Given
    query: Given
    params: Given
    endpoint: Given = _present
    input: Given = _present


# The engine (Python callers): any Mapping; an empty route/provider/params is absent, None messages/query too.
LENIENT = Reading(
    object_type=Mapping,
    route=_truthy,
    provider=_truthy,
    messages=_set,
    query=_set,
    params=_truthy,
    endpoint=_truthy,
    input=_set,
)
# The submission API (JSON bodies): a dict; a key that is there is given, whatever its value.
STRICT = Reading(
    object_type=dict,
    route=_present,
    provider=_present,
    messages=_present,
    query=_present,
    params=_present,
)


@dataclass(frozen=True)
class ItemShape:
    """What ``check_item_shape`` found: the problems in rule order (at most one per field group:
    custom_id, target, content, params) and which alternatives the item names when that part is sound."""

    problems: tuple[ShapeProblem, ...]
    target: str = ""  # "route" or "provider"; "" when the target has a problem
    content: str = ""  # "messages", "query" or "input"; "" when the content has a problem
    endpoint: str = CHAT_ENDPOINT  # the item's endpoint (ITEM_ENDPOINTS; "chat" when it is unknown)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, field: str) -> Problem | None:
        """The problem reported for ``field`` (e.g. "custom_id", "route", "messages"), if any."""
        for found in self.problems:
            if found.field == field:
                return found.problem
        return None


def _custom_id(item: Mapping[str, Any]) -> Problem | None:
    if "custom_id" not in item:
        return Problem.CUSTOM_ID_MISSING
    value = item["custom_id"]
    if not isinstance(value, str):
        return Problem.CUSTOM_ID_NOT_A_STRING
    return Problem.CUSTOM_ID_EMPTY if not value else None


def _one_of(first: bool, second: bool, both: Problem, neither: Problem) -> Problem | None:
    if first and second:
        return both
    return None if first or second else neither


def _endpoint(item: Mapping[str, Any], reading: Reading) -> tuple[str, ShapeProblem | None]:
    if not reading.endpoint(item, "endpoint"):
        return CHAT_ENDPOINT, None
    value = item["endpoint"]
    if isinstance(value, str) and value in ITEM_ENDPOINTS:
        return value, None
    return CHAT_ENDPOINT, ShapeProblem("endpoint", Problem.ENDPOINT_UNKNOWN)


def token_array(value: Any) -> bool:
    """A non-empty list of token ids (integers >= 0, not booleans): OpenAI's pre-tokenized input."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)
    )


def input_problem(value: Any) -> Problem | None:
    """What is wrong with an embeddings ``input`` (None: a non-empty string, a non-empty list of
    non-empty strings, or — as OpenAI takes them — one token array or a list of token arrays)."""
    if isinstance(value, str):
        return Problem.INPUT_EMPTY if not value else None
    if not isinstance(value, list):
        return Problem.INPUT_NOT_TEXT
    if not value:
        return Problem.INPUT_EMPTY
    if all(isinstance(text, str) and text for text in value) or token_array(value):
        return None
    return None if all(token_array(one) for one in value) else Problem.INPUT_ELEMENT_NOT_TEXT


def _embeddings_content(item: Mapping[str, Any], reading: Reading) -> tuple[str, ShapeProblem | None]:
    for other in ("messages", "query"):
        if getattr(reading, other)(item, other):
            return "", ShapeProblem(other, Problem.CONTENT_NOT_FOR_EMBEDDINGS)
    if not reading.input(item, "input"):
        return "", ShapeProblem("input", Problem.INPUT_MISSING)
    wrong = input_problem(item["input"])
    return ("", ShapeProblem("input", wrong)) if wrong is not None else ("input", None)


def _content(item: Mapping[str, Any], reading: Reading, endpoint: str) -> tuple[str, ShapeProblem | None]:
    if endpoint == EMBEDDINGS_ENDPOINT:
        return _embeddings_content(item, reading)
    if reading.input(item, "input"):
        return "", ShapeProblem("input", Problem.INPUT_NOT_FOR_CHAT)
    has_messages, has_query = reading.messages(item, "messages"), reading.query(item, "query")
    both = _one_of(has_messages, has_query, Problem.CONTENT_BOTH, Problem.CONTENT_NEITHER)
    if both is not None:
        return "", ShapeProblem("messages", both)
    if has_query:
        if not isinstance(item["query"], str):
            return "", ShapeProblem("query", Problem.QUERY_NOT_A_STRING)
        return "query", None
    messages = item["messages"]
    if not isinstance(messages, list):
        return "", ShapeProblem("messages", Problem.MESSAGES_NOT_A_LIST)
    if not messages:
        return "", ShapeProblem("messages", Problem.MESSAGES_EMPTY)
    return "messages", None


def check_item_shape(item: object, reading: Reading) -> ItemShape:
    """Check ``item`` against the ITEM shape as ``reading`` reads it; never raises."""
    if not isinstance(item, reading.object_type):
        return ItemShape((ShapeProblem("", Problem.NOT_AN_OBJECT),))
    item = cast(Mapping[str, Any], item)  # both readings' object types are Mappings
    problems: list[ShapeProblem] = []
    custom_id = _custom_id(item)
    if custom_id is not None:
        problems.append(ShapeProblem("custom_id", custom_id))
    has_route, has_provider = reading.route(item, "route"), reading.provider(item, "provider")
    target_problem = _one_of(has_route, has_provider, Problem.TARGET_BOTH, Problem.TARGET_NEITHER)
    if target_problem is not None:
        problems.append(ShapeProblem("route", target_problem))
    target = "" if target_problem is not None else ("route" if has_route else "provider")
    endpoint, endpoint_problem = _endpoint(item, reading)
    if endpoint_problem is not None:
        problems.append(endpoint_problem)
        content = ""
    else:
        content, content_problem = _content(item, reading, endpoint)
        if content_problem is not None:
            problems.append(content_problem)
    if reading.params(item, "params") and not isinstance(item["params"], reading.object_type):
        problems.append(ShapeProblem("params", Problem.PARAMS_NOT_AN_OBJECT))
    return ItemShape(tuple(problems), target, content, endpoint)

"""Per endpoint of a ``/v1`` batch, how a line's body is read into the native ITEM's fields and how a
succeeded item's answer is written into its output line's ``response.body`` (openai_api/conversion.py
asks ``line_body(endpoint)``). ``/v1/chat/completions``: the body's ``messages`` and the rest as params,
the chat answer as it is. ``/v1/responses``: the body read as the interactive lane reads a Responses
request (interactive/surfaces/responses_request.py) into the same chat fields, the chat answer written
as a Response object (interactive/surfaces/responses.py; the request's echo fields — instructions,
tools, metadata … — are not kept with the item, so the object shows their defaults). ``/v1/embeddings``
(issue #39): an embeddings ITEM of the body's ``input`` (``"endpoint": "embeddings"``; a missing input is
the native validator's ``input`` error), the rest (dimensions, encoding_format, user) as params, the
embeddings answer as it is. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from interactive.errors import CallError
from interactive.surfaces import responses as responses_surface
from interactive.surfaces import responses_request

CHAT_COMPLETIONS = "/v1/chat/completions"
RESPONSES = "/v1/responses"
EMBEDDINGS = "/v1/embeddings"
Problem = tuple[str, str, str | None]  # a line's (code, message, param)


@dataclass(frozen=True)
class LineBody:
    """One endpoint's line reader (body → the ITEM's messages and params, or the line's problem) and
    answer writer (a RESULT's chat answer and the line's id → ``response.body``)."""

    read: Callable[[dict[str, Any]], tuple[dict[str, Any], Problem | None]]
    write: Callable[[dict[str, Any], str], Any]


def _chat_fields(body: dict[str, Any]) -> tuple[dict[str, Any], Problem | None]:
    fields: dict[str, Any] = {"params": {k: v for k, v in body.items() if k not in ("model", "messages")}}
    if "messages" in body:
        fields["messages"] = body["messages"]
    return fields, None


def _embeddings_fields(body: dict[str, Any]) -> tuple[dict[str, Any], Problem | None]:
    fields: dict[str, Any] = {"endpoint": "embeddings"}
    if "input" in body:
        fields["input"] = body["input"]
    fields["params"] = {k: v for k, v in body.items() if k not in ("model", "input")}
    return fields, None


def _responses_fields(body: dict[str, Any]) -> tuple[dict[str, Any], Problem | None]:
    """A Responses request body → the chat ITEM's fields (``stream`` refused: a batch answers whole)."""
    try:
        ask = responses_request.chat_request(body)
    except CallError as exc:
        return {}, (
            exc.code or "invalid_request",
            f"body.{exc.message}",
            f"body.{exc.param}" if exc.param else "body",
        )
    if ask.stream:
        return {}, ("invalid_request", "body.stream: a batch line is not streamed", "body.stream")
    return {"messages": ask.messages, "params": ask.params}, None


def _response_object(answer: dict[str, Any], line_id: str) -> dict[str, Any]:
    return responses_surface.from_chat(f"resp_{line_id.removeprefix('batch_req_')}", "", {}, answer)


LINE_BODIES: dict[str, LineBody] = {
    CHAT_COMPLETIONS: LineBody(_chat_fields, lambda answer, line_id: answer),
    RESPONSES: LineBody(_responses_fields, _response_object),
    EMBEDDINGS: LineBody(_embeddings_fields, lambda answer, line_id: answer),
}


def line_body(endpoint: str) -> LineBody:
    """The endpoint's reader and writer (an unknown endpoint, refused before any line is read: chat's)."""
    return LINE_BODIES.get(endpoint, LINE_BODIES[CHAT_COMPLETIONS])
